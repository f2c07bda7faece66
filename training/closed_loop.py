"""Closed-loop post-training rounds: rollouts with interventions -> critic -> post-training -> evaluation.

``vla-train experiment=posttrain_<method> init_from=<base checkpoint> loop.rounds=<n>`` runs, per round r,

1. rollouts of the current checkpoint with the simulated operator (through the env runner's ``collect``,
   so ``training`` never imports the simulator),
2. the algorithm's critic on demos + every round's rollouts so far, then post-training from the current
   checkpoint (one :class:`~training.loop.Trainer` run, the one training loop),
3. evaluation of the result,

and writes ``<out>/rounds.json`` and ``<out>/rounds.png`` (success per round, round 0 = the base).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from training.config import TrainConfig
from training.loop import Trainer, env_runner
from training.run_folder import run_dir, with_run_folder
from vla.data.sidecar import read_sidecar
from vla.errors import InputError
from vla.lock import folder_lock


def _runner(cfg: TrainConfig, out: Path):
    if not cfg.env.runner:
        raise ValueError("loop.rounds > 0 needs an env runner to collect rollouts: set env=sim")
    return env_runner(cfg, out)


def plot_rounds(rounds: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["round"] for r in rounds]
    y = [100 * r["success_rate"] for r in rounds]
    lo = [100 * (r["success_rate"] - r.get("success_ci_low", r["success_rate"])) for r in rounds]
    hi = [100 * (r.get("success_ci_high", r["success_rate"]) - r["success_rate"]) for r in rounds]
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=120)
    ax.errorbar(x, y, yerr=[lo, hi], marker="o", capsize=4)
    ax.set_xticks(x, ["base" if i == 0 else f"round {i}" for i in x])
    ax.set_ylabel("success (%) with 95% CI")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def collect_rollouts(
    runner: Any, ckpt: Path, rollouts: Path, *, episodes: int, seed: int, teleop: dict[str, Any]
) -> None:
    """``episodes`` rollouts (seeds ``seed + i``) in ``rollouts``. A collection that was interrupted kept
    its finished episodes (the writer commits each one); only the missing ones are run, with the seeds
    they would have had, so a resumed set equals an uninterrupted one."""
    have = len(read_sidecar(rollouts))  # committed episodes; none if the folder is new
    if have > episodes:
        raise InputError(f"{rollouts} holds {have} rollouts, more than loop.rollout_episodes={episodes}")
    if have == episodes:
        return
    if have:
        print(f"{rollouts}: {have} of {episodes} rollouts there (an interrupted collection); the rest follow")
    print(f"{episodes - have} rollouts of {ckpt} with the simulated operator -> {rollouts}")
    stats = runner.collect(ckpt, rollouts, episodes=episodes - have, seed=seed + have, teleop=teleop)
    print("rollouts: " + ", ".join(f"{k}={v}" for k, v in stats.items()))


def closed_loop(cfg: TrainConfig) -> Path:
    """Run ``cfg.loop.rounds`` rounds from ``cfg.init_from``; returns the last round's checkpoint.

    Holds ``cfg.out``'s folder lock throughout: a second run on the same folder is refused by name."""
    cfg = with_run_folder(cfg)  # out=None: a new folder of its own
    with folder_lock(run_dir(cfg), "closed-loop post-training"):
        return run_rounds(cfg)


def rollouts_folder(cfg: TrainConfig, r: int) -> Path:
    """Where round ``r``'s rollouts live: ``loop.rollouts_dir`` (``{round}`` replaced), else in ``<out>``."""
    d = cfg.loop.rollouts_dir
    return Path(d.format(round=r)) if d else run_dir(cfg) / f"round_{r}" / "rollouts"


def round_config(cfg: TrainConfig, r: int, init_from: str | Path) -> TrainConfig:
    """Round ``r``'s training run: from ``init_from`` on ``data.roots`` and rounds 1..r's rollouts, in
    ``<out>/round_<r>/train`` (a rerun builds the same config, so an interrupted round resumes)."""
    roots = [*cfg.data.roots, *(str(rollouts_folder(cfg, i)) for i in range(1, r + 1))]
    return dataclasses.replace(
        cfg,
        init_from=str(Path(init_from)),
        out=str(run_dir(cfg) / f"round_{r}" / "train"),
        data=dataclasses.replace(cfg.data, roots=roots),
        loop=dataclasses.replace(cfg.loop, rounds=0),
    )


def run_rounds(cfg: TrainConfig) -> Path:
    """The rounds, in ``cfg.out`` (whose folder lock the caller holds)."""
    if not cfg.init_from:
        raise ValueError("loop.rounds > 0 post-trains a base policy: set init_from=<checkpoint folder>")
    loop = cfg.loop
    out = run_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    runner = _runner(cfg, out)
    report = out / "rounds.json"
    rounds: list[dict[str, Any]] = json.loads(report.read_text()) if report.exists() else []
    ckpt = Path(cfg.init_from)
    if not rounds:  # round 0: the base policy as it is
        base = {}
        if loop.evaluate_base:
            print(f"round 0: evaluating the base policy {ckpt}")
            base = runner.run(ckpt, 0)
        rounds.append({"round": 0, "checkpoint": str(ckpt), **base})
        report.write_text(json.dumps(rounds, indent=2))
    for r in range(1, loop.rounds + 1):
        rollouts = rollouts_folder(cfg, r)
        done = next((x for x in rounds if x["round"] == r), None)
        if done is not None:  # finished in an earlier, interrupted run
            ckpt = Path(done["checkpoint"])
            continue
        collect_rollouts(
            runner,
            ckpt,
            rollouts,
            episodes=loop.rollout_episodes,
            seed=loop.rollout_seed + r * loop.rollout_episodes,
            teleop=dict(loop.teleop),
        )
        trainer = Trainer(round_config(cfg, r, ckpt))
        ckpt = trainer.run()
        metrics = trainer.last_metrics or runner.run(ckpt, r)
        rounds.append({"round": r, "checkpoint": str(ckpt), **trainer.prepared, **metrics})
        report.write_text(json.dumps(rounds, indent=2))
    if all("success_rate" in r for r in rounds):
        plot_rounds(rounds, out / "rounds.png", f"{cfg.algo['name']} on {cfg.env.task}")
    print(rounds_table(rounds))
    print(f"plot: {out / 'rounds.png'}")
    return ckpt


def rounds_table(rounds: list[dict[str, Any]]) -> str:
    lines = ["| round | success | 95% CI | mean length |", "|---|---|---|---|"]
    for r in rounds:
        if "success_rate" not in r:
            continue
        lines.append(
            f"| {'base' if r['round'] == 0 else r['round']} | {100 * r['success_rate']:.0f}% "
            f"| [{100 * r.get('success_ci_low', 0):.0f}, {100 * r.get('success_ci_high', 1):.0f}] "
            f"| {r.get('mean_length', float('nan')):.1f} |"
        )
    return "\n".join(lines)
