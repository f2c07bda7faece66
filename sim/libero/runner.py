"""The ``libero`` env runner: scores a checkpoint on a LIBERO suite for the training loop, and collects its
rollouts each round (``vla-train ... env=libero env.task=<suite>``; training never imports the simulator).

``env.options`` holds the LIBERO-only settings: ``tasks`` (indices or names; default all), ``max_steps``
(default the suite's), ``image_size``, ``rollout_first_init`` (the initial state the rollouts start from,
default 25: evaluations use states 0..episodes-1, so with 25 episodes per task the two never share a state).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim.evaluation import outcome_metrics
from sim.libero.evaluation import LiberoEvalConfig, evaluate_libero
from sim.libero.operator import OperatorConfig
from sim.libero.rollout import collect_libero
from sim.libero.suite import MAX_STEPS, suite_tasks
from vla.errors import InputError
from vla.evaluation import RUNNERS
from vla.runtime.config import DeployConfig


def episode_limit(task: str) -> int | None:
    """The step limit of suite ``task`` (None: not a LIBERO suite)."""
    return MAX_STEPS.get(task)


@RUNNERS.register("libero")
class LiberoRunner:
    """``episodes`` per task of suite ``task`` through :func:`sim.libero.evaluation.evaluate_libero`."""

    def __init__(
        self,
        task: str,
        episodes: int,
        workers: int = 2,
        horizon: int | None = None,
        seed: int = 1000,
        out: str = "outputs/train/eval",
        videos: int = 1,
        tasks: list[int | str] | None = None,
        max_steps: int | None = None,
        image_size: list[int] | None = None,
        rollout_first_init: int = 25,
    ) -> None:
        if task not in MAX_STEPS:
            raise InputError(f"env.task={task}: with env=libero, name a suite ({', '.join(MAX_STEPS)})")
        self.suite, self.episodes, self.workers, self.horizon = task, episodes, workers, horizon
        self.seed, self.out, self.videos, self.max_steps = seed, Path(out), videos, max_steps
        self.tasks = None if tasks is None else [str(t) for t in tasks]
        self.image_size = None if image_size is None else (int(image_size[0]), int(image_size[1]))
        self.rollout_first_init = rollout_first_init
        suite_tasks(self.suite, self.tasks)  # an unknown task: one line, before any training

    def _cfg(self, checkpoint: Path, **kw: Any) -> LiberoEvalConfig:
        fields: dict[str, Any] = {
            "checkpoint": str(checkpoint),
            "suite": self.suite,
            "tasks": self.tasks,
            "max_steps": self.max_steps,
            "image_size": self.image_size,
            "workers": self.workers,
            "seed": self.seed,
            "deploy": DeployConfig(horizon=self.horizon),
            "progress": False,
        }
        return LiberoEvalConfig(**(fields | kw))

    def run(self, checkpoint: Path, step: int) -> dict[str, Any]:
        result = evaluate_libero(
            self._cfg(
                checkpoint,
                episodes=self.episodes,
                out=str(self.out / f"step_{step:07d}"),
                videos=self.videos,
            )
        )
        return {
            **outcome_metrics(result.episodes),
            "per_task_success": {r["name"]: r["success_rate"] for r in result.per_task()},
            "outcomes": [[bool(e.success), int(e.length), int(e.index)] for e in result.episodes],
        }

    def collect(
        self, checkpoint: Path, out: Path, *, episodes: int, seed: int, teleop: dict[str, Any]
    ) -> dict[str, float]:
        """``episodes`` rollouts over the tasks in turn, episode ``seed + i`` of the interleaved plan from
        initial state ``rollout_first_init``, with the scripted operator (:mod:`sim.libero.operator`) when
        ``teleop`` enables it (its fields: ``enabled``, ``patience``, ``tol``, ``phase_limit``)."""
        try:
            operator = OperatorConfig(**{"enabled": False, **teleop})
        except TypeError as exc:
            raise InputError(
                f"loop.teleop with env=libero: {exc} (fields of sim.libero.operator.OperatorConfig)"
            ) from None
        cfg = self._cfg(
            checkpoint, episodes=episodes, first_init=self.rollout_first_init, offset=seed, operator=operator
        )
        return collect_libero(cfg, out)
