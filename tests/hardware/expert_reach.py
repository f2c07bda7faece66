"""Where the scripted experts take the Panda's tool point: the data the Panda workspace box is sized from.

``python tests/hardware/expert_reach.py [seeds]`` prints, per task, the lowest and highest x, y, z (m, robot
base frame) over every reached grip-site position and every commanded arm target's forward kinematics.
"""

from __future__ import annotations

import sys

import numpy as np

from sim.env import EnvConfig, TabletopEnv
from sim.experts import ScriptedExpert, run_expert_episode
from vla.robot import Kinematics

TASKS = ("reach", "pick_place", "push", "stack", "drawer")


def tool_points(task: str, seeds: range, kinematics: Kinematics) -> np.ndarray:  # [N, 3]
    """Reached grip-site positions and the FK of each commanded arm target, over ``seeds`` expert episodes."""
    env = TabletopEnv(EnvConfig(task=task, render=False))
    expert = ScriptedExpert(env)
    points: list[np.ndarray] = []

    def record(obs, action, *_) -> None:
        points.append(env.grip_pos())
        points.append(kinematics.tool_position(np.asarray(action[:7], dtype=np.float64)))

    for seed in seeds:
        ok, _ = run_expert_episode(env, expert, seed, on_step=record)
        assert ok, f"{task} expert failed on seed {seed}"
    env.close()
    return np.stack(points)


def main(n_seeds: int = 20) -> None:
    from hardware.profiles import get_profile

    kin = get_profile("panda").kinematics
    assert kin is not None
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    for task in TASKS:
        p = tool_points(task, range(n_seeds), kin)
        lo, hi = np.minimum(lo, p.min(0)), np.maximum(hi, p.max(0))
        print(f"{task:10s} min {np.round(p.min(0), 3)} max {np.round(p.max(0), 3)}")
    print(f"{'all':10s} min {np.round(lo, 3)} max {np.round(hi, 3)}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
