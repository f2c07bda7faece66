"""The ``sim`` env runner: scores a checkpoint in MuJoCo for the training loop (``env=sim``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim.evaluation import EvalConfig, evaluate, outcome_metrics
from sim.rollout import RolloutConfig, rollout
from sim.teleop import TeleopConfig
from vla.evaluation import RUNNERS
from vla.runtime.config import DeployConfig


def episode_limit(task: str) -> int | None:
    """``task``'s episode step limit (at 10 Hz, as ``vla-tasks`` lists it); None: no such MuJoCo task."""
    from sim.tasks import TASKS

    return TASKS.get(task).max_steps if task in TASKS else None


@RUNNERS.register("sim")
class SimRunner:
    """Runs ``episodes`` seeded episodes of ``task`` through the shared runtime (``sim.evaluation``)."""

    def __init__(
        self,
        task: str,
        episodes: int,
        workers: int = 2,
        horizon: int | None = None,
        seed: int = 1000,
        out: str = "outputs/train/eval",
        videos: int = 1,
    ) -> None:
        self.task, self.episodes, self.workers, self.horizon = task, episodes, workers, horizon
        self.seed, self.out, self.videos = seed, Path(out), videos

    def _deploy(self) -> DeployConfig:
        return DeployConfig(horizon=self.horizon)

    def run(self, checkpoint: Path, step: int) -> dict[str, float]:
        result = evaluate(
            EvalConfig(
                checkpoint=str(checkpoint),
                task=self.task,
                episodes=self.episodes,
                workers=self.workers,
                seed=self.seed,
                deploy=self._deploy(),
                out=str(self.out / f"step_{step:07d}"),
                videos=self.videos,
                progress=False,
            )
        )
        return {
            **outcome_metrics(result.episodes),
            "outcomes": [[bool(e.success), int(e.length), int(e.seed)] for e in result.episodes],
        }

    def collect(
        self, checkpoint: Path, out: Path, *, episodes: int, seed: int, teleop: dict[str, Any]
    ) -> dict[str, float]:
        summary = rollout(
            RolloutConfig(
                checkpoint=str(checkpoint),
                task=self.task,
                episodes=episodes,
                workers=self.workers,
                seed=seed,
                deploy=self._deploy(),
                out=str(out),
                resume=True,  # append: the caller counts what is there (an interrupted collection)
                teleop=TeleopConfig(**teleop),
                progress=True,
            )
        )
        return {
            "episodes": summary.episodes,
            "successes": summary.successes,
            "takeovers": summary.takeovers,
            "episodes_with_takeover": summary.episodes_with_takeover,
            "intervention_frames": summary.intervention_frames,
            "frames": summary.frames,
        }
