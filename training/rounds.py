"""Where a closed loop's rounds keep their rollouts and how each round's training run is configured.

Imported by both :mod:`training.loop` (``check_inputs`` compares a closed loop's first round's config) and
:mod:`training.closed_loop` (which runs the rounds through :class:`training.loop.Trainer`), so neither
imports the other's caller: no import cycle.

Lineages: round r's rollouts are made by that run's own round r-1 checkpoint. Only round 1's (made by
``init_from``, the same for every run from that base) may be shared between runs, through
``loop.base_rollouts_dir``; rounds >= 2 always live in ``<out>/round_<r>/rollouts``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from training.config import TrainConfig
from training.run_folder import run_dir


def rollouts_folder(cfg: TrainConfig, r: int) -> Path:
    """Where round ``r``'s rollouts live: ``loop.base_rollouts_dir`` for round 1 when set (shared by runs
    from the same ``init_from``), else ``<out>/round_<r>/rollouts`` (this run's lineage)."""
    if r == 1 and cfg.loop.base_rollouts_dir:
        return Path(cfg.loop.base_rollouts_dir)
    return run_dir(cfg) / f"round_{r}" / "rollouts"


def rollout_seed(cfg: TrainConfig, r: int) -> int:
    """Round ``r``'s first rollout seed; it depends only on ``r`` and ``loop``, so every run's round ``r``
    meets the same episodes (the final collection after round R uses round R+1's)."""
    return cfg.loop.rollout_seed + r * cfg.loop.rollout_episodes


def round_config(cfg: TrainConfig, r: int, init_from: str | Path) -> TrainConfig:
    """Round ``r``'s training run: from ``init_from`` on ``data.roots`` and rounds 1..r's rollouts, in
    ``<out>/round_<r>/train`` (an interrupted round's training is redone there from its start:
    ``closed_loop.restart_training``). Its final evaluation runs ``env.episodes`` episodes in the last
    round, ``loop.round_eval_episodes`` (when set) in the rounds before it."""
    roots = [*cfg.data.roots, *(str(rollouts_folder(cfg, i)) for i in range(1, r + 1))]
    episodes = cfg.env.episodes
    if r < cfg.loop.rounds and cfg.loop.round_eval_episodes is not None:
        episodes = cfg.loop.round_eval_episodes
    return dataclasses.replace(
        cfg,
        init_from=str(Path(init_from)),
        out=str(run_dir(cfg) / f"round_{r}" / "train"),
        data=dataclasses.replace(cfg.data, roots=roots),
        env=dataclasses.replace(cfg.env, episodes=episodes),
        loop=dataclasses.replace(cfg.loop, rounds=0),
    )
