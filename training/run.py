"""What ``vla-train`` runs: one training run, or closed-loop rounds when ``loop.rounds > 0``.

The dispatch lives here, above both :mod:`training.loop` (the one training loop) and
:mod:`training.closed_loop` (the rounds, which run that loop), so neither imports the other's caller.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from training import loop
from training.closed_loop import run_rounds
from training.config import TrainConfig


def train(
    cfg: TrainConfig,
    *,
    experiment: str | None = None,
    job: int | None = None,
    record: Callable[[Path], None] | None = None,
) -> Path:
    """:func:`training.loop.train` with closed-loop rounds for ``loop.rounds > 0``; returns the final
    checkpoint folder (the last round's)."""
    return loop.train(cfg, experiment=experiment, job=job, record=record, rounds=run_rounds)
