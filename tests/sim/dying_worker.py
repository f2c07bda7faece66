"""A rollout worker whose process dies in the middle of episode 1, once (a marker file beside the dataset
remembers that it did), for the Ray runner's test."""

from __future__ import annotations

import os
from pathlib import Path

from sim.rollout import RolloutWorker


class DiesOnce(RolloutWorker):
    def run(self, index: int):
        marker = Path(str(self.cfg.out)).parent / "worker_died"
        if index == 1 and not marker.exists():
            marker.touch()
            robot = self.deployment.robot
            command, calls = robot.command, [0]

            def dying(action):
                calls[0] += 1
                if calls[0] == 5:  # five control steps into the episode
                    os._exit(1)
                return command(action)

            robot.command = dying
        return super().run(index)
