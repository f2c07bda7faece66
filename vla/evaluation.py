"""The evaluation seam: the training loop asks an ``EnvRunner`` to score a checkpoint, without importing
the simulator (``training`` and ``sim`` are independent layers; the runner's module is named in config)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Protocol

from vla.registry import Registry


class EnvRunner(Protocol):
    def run(self, checkpoint: Path, step: int) -> dict[str, float]:
        """Evaluate the policy saved at ``checkpoint``; return scalar metrics (e.g. ``success_rate``)."""
        ...

    def collect(
        self, checkpoint: Path, out: Path, *, episodes: int, seed: int, teleop: dict[str, Any]
    ) -> dict[str, float]:
        """Roll the policy out with a (simulated) operator who may take over (episode i gets seed
        ``seed + i``); append the episodes to the dataset at ``out`` (created if absent) and return counts
        (successes, takeovers, ...) of the episodes this call ran."""
        ...


RUNNERS: Registry = Registry("env runner")


def make_runner(name: str, module: str, **kwargs: Any) -> EnvRunner:
    """Import ``module`` (which registers runners) and build the runner ``name``."""
    importlib.import_module(module)
    return RUNNERS.get(name)(**kwargs)


def episode_limit(module: str, task: str) -> int | None:
    """The step limit of ``task`` in the simulator whose ``module`` registers the env runners (its
    ``episode_limit(task)``); None when the module has no such task."""
    limit = getattr(importlib.import_module(module), "episode_limit", None)
    return None if limit is None else limit(task)
