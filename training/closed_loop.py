"""Closed-loop post-training rounds: rollouts with interventions -> critic -> post-training -> evaluation.

``vla-train experiment=posttrain_<method> init_from=<base checkpoint> loop.rounds=<n>`` runs, per round r,

1. rollouts of the current checkpoint with the simulated operator (through the env runner's ``collect``,
   so ``training`` never imports the simulator),
2. the algorithm's critic on demos + every round's rollouts so far, then post-training from the current
   checkpoint (one :class:`~training.loop.Trainer` run, the one training loop),
3. evaluation of the result,

and writes ``<out>/rounds.json`` and ``<out>/rounds.png`` (round 0 = the base).

**Lineages** (:mod:`training.rounds`): round r's rollouts are made by this run's own round r-1
checkpoint, in ``<out>/round_<r>/rollouts``. Only round 1's, made by ``init_from``, may be shared by runs
from the same base (``loop.base_rollouts_dir``: the first run collects them, the others reuse them). The
rollout seeds depend only on r and ``loop.rollout_seed``, so every run meets the same episodes. Each
episode records the checkpoint that made it and its seed (sidecar ``extra.checkpoint``, ``extra.seed``);
a folder holding another checkpoint's or another seed's episodes is refused, never mixed.

**What each row of ``rounds.json`` reports about its checkpoint** (row r = round r's checkpoint; row 0 =
``init_from``): from the evaluation without operator (``env.episodes`` episodes), ``success_rate`` with
its Wilson interval, ``success_length_mean`` (time to success: control steps of the successful episodes)
and ``successes_per_1000_steps`` (successes / all evaluation steps x 1000); from rollouts *with* the
simulated operator, ``takeovers_per_episode`` (with a 95% normal interval) and
``operator_frames_per_episode``. A checkpoint's operator rollouts are the next round's: round r+1's
rollouts are made by round r's checkpoint, so they are attributed to row r (``operator_rollouts`` names the
folder), never to the checkpoint trained on them. The last round's checkpoint has no next round: with
``loop.final_rollouts=true`` (default) one more collection, round R+1's (its seeds, its folder
``<out>/round_<R+1>/rollouts``), measures it; a later run with ``loop.rounds=R+1`` trains on those.
``loop.round_eval_episodes`` evaluates the rounds before the last on fewer episodes (each row's
``eval_episodes`` says how many).

**Compute.** Row r's ``wall_minutes`` is what round r took (its rollouts, critic, training and evaluation;
on row R the final collection too). A round is the unit of resumption: an interrupted round's training is
redone from its start (:func:`restart_training`; a run of ``vla-train`` without ``loop.rounds`` resumes
from its checkpoint instead), and its rollouts committed before the interruption are kept and not timed
again (a few seconds of collection). So a resumed lineage's rows add up to what an uninterrupted run takes,
not to the time since the last restart. Non-finite numbers (a time to success without successes) are
written as ``null``.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path
from typing import Any

from training.config import TrainConfig
from training.loop import Trainer, env_runner
from training.rounds import rollout_seed, rollouts_folder, round_config
from training.run_folder import run_dir, with_run_folder
from vla.data.sidecar import read_sidecar
from vla.errors import InputError
from vla.lock import folder_lock
from vla.provenance import record_json


def _runner(cfg: TrainConfig, out: Path):
    if not cfg.env.runner:
        raise ValueError("loop.rounds > 0 needs an env runner to collect rollouts: set env=sim")
    return env_runner(cfg, out)


def _errorbar(ax: Any, rows: list[dict[str, Any]], key: str, low: str, high: str, scale: float) -> None:
    rows = [r for r in rows if r.get(key) is not None]
    y = [scale * r[key] for r in rows]
    lo = [scale * (r[key] - r.get(low, r[key])) for r in rows]
    hi = [scale * (r.get(high, r[key]) - r[key]) for r in rows]
    ax.errorbar([r["round"] for r in rows], y, yerr=[lo, hi], marker="o", capsize=4)


def plot_rounds(rounds: list[dict[str, Any]], path: Path, title: str) -> None:
    """Two panels against the round: success (95% Wilson interval) and takeovers per episode (95%)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["round"] for r in rounds]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2), dpi=120)
    _errorbar(left, rounds, "success_rate", "success_ci_low", "success_ci_high", 100)
    left.set_ylabel("success (%) with 95% CI")
    left.set_ylim(0, 100)
    _errorbar(right, rounds, "takeovers_per_episode", "takeovers_ci_low", "takeovers_ci_high", 1)
    right.set_ylabel("takeovers per episode (95% CI)")
    right.set_ylim(bottom=0)
    for ax in (left, right):
        ax.set_xticks(x, ["base" if i == 0 else f"round {i}" for i in x])
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def operator_stats(rollouts: Path) -> dict[str, Any]:
    """Takeovers and operator frames per episode over the episodes in ``rollouts`` (its sidecar's
    ``extra.takeovers`` and ``extra.intervention_frames``), with a 95% normal interval on takeovers."""
    eps = read_sidecar(rollouts)
    n = len(eps)
    takeovers = [float(e.extra.get("takeovers", 0)) for e in eps]
    mean = sum(takeovers) / n
    half = 1.96 * math.sqrt(sum((t - mean) ** 2 for t in takeovers) / max(1, n - 1) / n)
    frames = [e.extra.get("intervention_frames") for e in eps]
    return {
        "takeovers_per_episode": mean,
        "takeovers_ci_low": max(0.0, mean - half),
        "takeovers_ci_high": mean + half,
        # None: episodes recorded before extra.intervention_frames existed
        "operator_frames_per_episode": None if None in frames else sum(frames) / n,
        "operator_rollouts": str(rollouts),
    }


def _attribute(rounds: list[dict[str, Any]], r: int, rollouts: Path) -> None:
    """Row ``r`` (the checkpoint that made ``rollouts``) gets their operator statistics."""
    row = next(x for x in rounds if x["round"] == r)
    row.update(operator_stats(rollouts))


def check_made_by(rollouts: Path, ckpt: Path, seed: int) -> None:
    """Refuse a rollouts folder whose episodes another checkpoint made, or with other seeds (a shared
    ``loop.base_rollouts_dir`` used by a run from another base or ``loop.rollout_seed``)."""
    for i, e in enumerate(read_sidecar(rollouts)):
        made, s = e.extra.get("checkpoint"), e.extra.get("seed")
        if made is None or Path(made).resolve() != Path(ckpt).resolve() or s != seed + i:
            raise InputError(
                f"{rollouts}: episode {i} was made by {made} with seed {s}, not by {ckpt} with seed "
                f"{seed + i}; "
                "rollouts of another checkpoint or loop.rollout_seed are not reused: point "
                "loop.base_rollouts_dir (or out=) elsewhere"
            )


def collect_rollouts(
    runner: Any, ckpt: Path, rollouts: Path, *, episodes: int, seed: int, teleop: dict[str, Any]
) -> None:
    """``episodes`` rollouts (seeds ``seed + i``) in ``rollouts``. A collection that was interrupted kept
    its finished episodes (the writer commits each one); only the missing ones are run, with the seeds
    they would have had, so a resumed set equals an uninterrupted one. A folder holding episodes of
    another checkpoint or seed is refused (:func:`check_made_by`)."""
    check_made_by(rollouts, ckpt, seed)
    have = len(read_sidecar(rollouts))  # committed episodes; none if the folder is new
    if have > episodes:
        raise InputError(f"{rollouts} holds {have} rollouts, more than loop.rollout_episodes={episodes}")
    if have == episodes:
        return
    if have:
        print(f"{rollouts}: {have} of {episodes} rollouts there (an interrupted collection); the rest follow")
    who = "with the simulated operator" if teleop.get("enabled", True) else "without an operator"
    print(f"{episodes - have} rollouts of {ckpt} {who} -> {rollouts}")
    stats = runner.collect(ckpt, rollouts, episodes=episodes - have, seed=seed + have, teleop=teleop)
    print("rollouts: " + ", ".join(f"{k}={v}" for k, v in stats.items()))


def closed_loop(cfg: TrainConfig) -> Path:
    """Run ``cfg.loop.rounds`` rounds from ``cfg.init_from``; returns the last round's checkpoint.

    Holds ``cfg.out``'s folder lock throughout: a second run on the same folder is refused by name."""
    cfg = with_run_folder(cfg)  # out=None: a new folder of its own
    with folder_lock(run_dir(cfg), "closed-loop post-training"):
        return run_rounds(cfg)


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
        write_rounds(report, rounds)
    for r in range(1, loop.rounds + 1):
        done = next((x for x in rounds if x["round"] == r), None)
        if done is not None:  # finished in an earlier, interrupted run
            ckpt = Path(done["checkpoint"])
            continue
        t0 = time.perf_counter()
        _measure(cfg, runner, rounds, r, ckpt)  # round r's rollouts: round r-1's takeovers
        write_rounds(report, rounds)
        round_cfg = round_config(cfg, r, ckpt)
        restart_training(Path(round_cfg.out))
        trainer = Trainer(round_cfg)
        ckpt = trainer.run()
        metrics = trainer.last_metrics or env_runner(round_cfg, out).run(ckpt, r)
        row = {"round": r, "checkpoint": str(ckpt), "eval_episodes": round_cfg.env.episodes}
        row["wall_minutes"] = round((time.perf_counter() - t0) / 60, 2)
        rounds.append({**row, **trainer.prepared, **metrics})
        write_rounds(report, rounds)
    final = next(x for x in rounds if x["round"] == loop.rounds)
    if loop.final_rollouts and "takeovers_per_episode" not in final:  # the last checkpoint's takeovers
        t0 = time.perf_counter()
        _measure(cfg, runner, rounds, loop.rounds + 1, Path(final["checkpoint"]))
        final["wall_minutes"] = round(final.get("wall_minutes", 0.0) + (time.perf_counter() - t0) / 60, 2)
        write_rounds(report, rounds)
    plot_rounds(rounds, out / "rounds.png", f"{cfg.algo['name']} on {cfg.env.task}")
    print(rounds_table(rounds))
    print(f"plot: {out / 'rounds.png'}")
    return ckpt


def restart_training(train: Path) -> None:
    """Remove what an interrupted run of a round left in its training folder (checkpoint, critic, labels),
    so that the round trains again from round r-1's checkpoint and its row times all of it (module
    docstring, Compute). Its rollouts, in ``round_<r>/rollouts``, are kept."""
    if train.exists():
        print(f"{train}: an interrupted round's training; it restarts from the round's start")
        shutil.rmtree(train)


def write_rounds(path: Path, rounds: list[dict[str, Any]]) -> None:
    """``rounds.json``, strict JSON (:func:`vla.provenance.record_json`: a NaN is written as null)."""
    path.write_text(record_json(rounds))


def lineage_minutes(rounds: list[dict[str, Any]]) -> float | None:
    """The compute of a finished run of rounds: the sum of its rows' ``wall_minutes`` (None where a row was
    written by a version that did not time rounds)."""
    walls = [r.get("wall_minutes") for r in rounds if r["round"] > 0]
    return None if not walls or None in walls else round(sum(walls), 2)


def _measure(cfg: TrainConfig, runner: Any, rounds: list[dict[str, Any]], r: int, ckpt: Path) -> None:
    """Round ``r``'s rollouts with the operator, made by ``ckpt`` (round r-1's checkpoint), whose row they
    measure."""
    rollouts = rollouts_folder(cfg, r)
    collect_rollouts(
        runner,
        ckpt,
        rollouts,
        episodes=cfg.loop.rollout_episodes,
        seed=rollout_seed(cfg, r),
        teleop=dict(cfg.loop.teleop),
    )
    _attribute(rounds, r - 1, rollouts)


def _cell(row: dict[str, Any], key: str, fmt: str, scale: float = 1) -> str:
    v = row.get(key)
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(scale * v, fmt)


def rounds_table(rounds: list[dict[str, Any]]) -> str:
    """The rounds as a Markdown table: each row is that round's checkpoint (see the module docstring)."""
    lines = [
        "| round | success | 95% CI | time to success | successes / 1000 steps | takeovers / episode "
        "| operator frames / episode |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rounds:
        ci = (
            f"[{100 * r['success_ci_low']:.0f}, {100 * r['success_ci_high']:.0f}]"
            if "success_ci_low" in r
            else "-"
        )
        lines.append(
            f"| {'base' if r['round'] == 0 else r['round']} | {_cell(r, 'success_rate', '.0%')} | {ci} "
            f"| {_cell(r, 'success_length_mean', '.1f')} | {_cell(r, 'successes_per_1000_steps', '.2f')} "
            f"| {_cell(r, 'takeovers_per_episode', '.2f')} "
            f"| {_cell(r, 'operator_frames_per_episode', '.1f')} |"
        )
    return "\n".join(lines)
