"""What a comparison shows: the final round's table, the per-round table and plot, the acceptance lines.

Every number comes from a record's cells (:mod:`training.compare.stats`), so ``--from-record`` prints the
same lines as the run that made the record, without training anything.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from training.compare import stats
from training.compare.arms import BASELINES
from vla.errors import InputError


def _ci(t: tuple[float, float, float], digits: int = 1, sign: bool = False) -> str:
    m, lo, hi = t
    if math.isnan(m):
        return "-"
    head = f"{m:+.{digits}f}" if sign else f"{m:.{digits}f}"
    return head if math.isnan(lo) else f"{head} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _x(ratio: float) -> str:
    return "-" if math.isnan(ratio) else f"{ratio:.2f}x"


def arm_names(record: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(every arm of base seed 0 in the record's order, its baselines)."""
    arms = list(dict.fromkeys(c["arm"] for c in record["cells"] if c["base_seed"] == 0))
    return arms, [a for a in arms if a in BASELINES]


def summary(record: dict[str, Any]) -> dict[str, Any]:
    arms, baselines = arm_names(record)
    return stats.summarise(stats.per_seed(record["cells"], 0), baselines, arms)


def acceptance_lines(record: dict[str, Any]) -> list[str]:
    """Per arm: ``final success:``, ``takeovers per episode:``, ``lift over best baseline:``, the
    takeovers against the best baseline by takeovers, successes per 1000 steps against the best baseline's,
    and time to success on the episodes both succeed (means and 95% t-intervals over training seeds)."""
    s = summary(record)
    b, bt = s["best_baseline"], s["best_baseline_takeovers"]
    lines = []
    for arm, a in s["arms"].items():
        lines += [
            f"{arm}: final success: {_ci(a['success'])} %",
            f"{arm}: takeovers per episode: {_ci(a['takeovers'], 2)} "
            f"({_ci(a['takeovers_vs_best_baseline'], 2, sign=True)} vs {bt})",
            f"{arm}: lift over best baseline: {_ci(a['lift_over_best_baseline'], sign=True)} points (vs {b})",
            f"{arm}: successes per 1000 steps: {_ci(a['per_1000_steps'], 2)} "
            f"({_x(a['per_1000_steps_ratio'])} {b}'s)",
            f"{arm}: time to success on the episodes both succeed: "
            f"{_ci(a['time_to_success_paired'], sign=True)} steps vs {b}",
        ]
    return lines


def final_table(record: dict[str, Any]) -> str:
    s = summary(record)
    rows = [
        f"Final round ({record['settings']['rounds']}), {record['settings']['eval_episodes']} evaluation "
        f"episodes per arm and seed; mean [95% t-interval over {record['seeds']} training seeds]; "
        "differences "
        f"paired by seed, to the best baseline by success ({s['best_baseline']}) and by takeovers "
        f"({s['best_baseline_takeovers']}):",
        "",
        "| arm | success (%) | takeovers / episode | operator frames / episode | time to success (steps) | "
        "successes / 1000 steps | lift over best baseline | takeovers vs best baseline |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for arm, a in s["arms"].items():
        rows.append(
            f"| {arm} | {_ci(a['success'])} | {_ci(a['takeovers'], 2)} | {_ci(a['operator_frames'])} | "
            f"{_ci(a['time_to_success'])} | {_ci(a['per_1000_steps'], 2)} "
            f"({_x(a['per_1000_steps_ratio'])}) | {_ci(a['lift_over_best_baseline'], sign=True)} | "
            f"{_ci(a['takeovers_vs_best_baseline'], 2, sign=True)} |"
        )
    return "\n".join(rows)


def rounds_table(record: dict[str, Any]) -> str:
    """Success (%) and takeovers per episode of each arm's checkpoint per round (means over seeds)."""
    arms, _ = arm_names(record)
    st = record["settings"]
    n = st["rounds"]
    head = ["base", *(f"round {r}" for r in range(1, n + 1))]
    lines = [
        f"Per round: success % / takeovers per episode (means over seeds; the rounds before round {n} on "
        f"{st['round_eval_episodes']} evaluation episodes, the base and round {n} on {st['eval_episodes']}; "
        "a "
        "checkpoint's takeovers are from the next round's rollouts, which it made):",
        "",
        "| arm | " + " | ".join(head) + " |",
        "|---|" + "---|" * len(head),
    ]
    for arm in arms:
        succ = {r: m for r, m, *_ in stats.by_round(record["cells"], arm, "success")}
        take = {r: m for r, m, *_ in stats.by_round(record["cells"], arm, "takeovers")}
        cells = [
            f"{succ[r]:.0f} / {take[r]:.2f}" if r in succ and r in take else "-" for r in range(0, n + 1)
        ]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def base_share_lines(record: dict[str, Any]) -> list[str]:
    """The base seed's share of the final success variance, for the arms run on a second base."""
    arms = sorted({c["arm"] for c in record["cells"] if c["base_seed"] > 0})
    out = []
    for arm in arms:
        share = stats.base_share(record["cells"], arm)
        if share is None:
            continue
        means = ", ".join(f"{m:.1f}" for m in share["base_means"])
        out.append(
            f"{arm}: base seed's share of the final success variance: "
            + ("-" if math.isnan(share["share"]) else f"{100 * share['share']:.0f}%")
            + " "
            f"(base means {means}; variance between bases {share['var_base']:.1f}, between training seeds "
            f"{share['var_seed']:.1f})"
        )
    return out


def compute_lines(record: dict[str, Any]) -> list[str]:
    """Each arm's compute: wall minutes per lineage (all rounds, rollouts and evaluations)."""
    arms = list(dict.fromkeys(c["arm"] for c in record["cells"]))
    lines = []
    for arm in arms:
        walls = [c["wall_minutes"] for c in record["cells"] if c["arm"] == arm and c["wall_minutes"]]
        if walls:
            lines.append(
                f"{arm}: {sum(walls) / len(walls):.1f} min per lineage, {sum(walls):.0f} min over "
                f"{len(walls)} lineages"
            )
    return lines


def plot(record: dict[str, Any], path: Path) -> None:
    """Success and takeovers per episode against the round, one line per arm (base seed 0, mean and 95%
    t-interval over training seeds); baselines dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms, baselines = arm_names(record)
    n = record["settings"]["rounds"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6), dpi=120)
    for i, arm in enumerate(arms):
        for ax, metric in ((left, "success"), (right, "takeovers")):
            pts = stats.by_round(record["cells"], arm, metric)
            if not pts:
                continue
            x = [r + 0.04 * (i - len(arms) / 2) for r, *_ in pts]  # side by side, so intervals show
            y = [m for _, m, _, _ in pts]
            err = [[0 if math.isnan(lo) else m - lo for _, m, lo, _ in pts],
                   [0 if math.isnan(hi) else hi - m for _, m, _, hi in pts]]  # fmt: skip
            ax.errorbar(
                x, y, yerr=err, marker="o", capsize=3, label=arm, ls="--" if arm in baselines else "-"
            )
    left.set_ylabel("success (%), 95% CI over seeds")
    left.set_ylim(0, 100)
    right.set_ylabel("takeovers per episode, 95% CI over seeds")
    right.set_ylim(bottom=0)
    for ax in (left, right):
        ax.set_xticks(range(n + 1), ["base", *(str(r) for r in range(1, n + 1))])
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(arms), 6), fontsize=8, frameon=False)
    fig.suptitle(f"{record['task']}: rounds of deploy -> takeovers -> post-train ({record['seeds']} seeds)")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def shares_table(record: dict[str, Any]) -> str:
    """Where each method's actor signal goes in the final round (``credit_share.py``): the share (%) of the
    per-frame weight on each part of the data beside that part's share of the frames (base seed 0, mean
    over training seeds); "" when no cell has shares."""
    cells = [c for c in record["cells"] if c["base_seed"] == 0 and c.get("credit_shares")]
    if not cells:
        return ""
    arms = list(dict.fromkeys(c["arm"] for c in cells))
    groups = sorted({g for c in cells for g in c["credit_shares"]})

    def mean(arm: str | None, g: str, key: str) -> float:
        v = [c["credit_shares"].get(g, {}).get(key, 0.0) for c in cells if arm is None or c["arm"] == arm]
        return sum(v) / len(v)

    lines = [
        f"Where the actor's signal goes in round {record['settings']['rounds']} (training/compare/"
        "credit_share.py): the share (%) of the per-frame weight (RECAP: of the I = 1 frames) on each "
        "part of the data; SFT continued gives each part its share of the frames, filtered BC gives "
        "failed episodes none:",
        "",
        "| method | " + " | ".join(groups) + " |",
        "|---|" + "---|" * len(groups),
        "| (frames) | " + " | ".join(f"{mean(arms[0], g, 'frames'):.1f}" for g in groups) + " |",
    ]
    lines += [f"| {a} | " + " | ".join(f"{mean(a, g, 'signal'):.1f}" for g in groups) + " |" for a in arms]
    return "\n".join(lines)


def render(record: dict[str, Any]) -> str:
    parts = [final_table(record), "", rounds_table(record)]
    shares = shares_table(record)
    if shares:
        parts += ["", shares]
    variance = base_share_lines(record)
    if variance:
        parts += ["", *variance]
    return "\n".join(parts)


def from_record(path: Path) -> None:
    """Print a stored record's acceptance lines (re-summarised from its cells); trains nothing.

    Raises:
        InputError: ``path`` does not exist or is not JSON; or it is not a comparison record (no
            ``cells``): e.g. a one-round ``posttrain_<task>.json``, which the commit it names reads."""
    try:
        record = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(
            f"{path}: no such record; a comparison writes one when it finishes "
            "(benchmarks/posttrain.py: benchmarks/results/rounds_<task>.json; vla-compare: <out>/<task>/"
            "<phase>_<key>/comparison.json)"
        ) from None
    except (OSError, ValueError) as exc:  # unreadable, or not JSON (json.JSONDecodeError is a ValueError)
        raise InputError(f"{path}: not a readable JSON record ({exc})") from exc
    if "cells" not in record:
        raise InputError(
            f"{path} is not a comparison record (no 'cells'): a one-round record of commit "
            f"{str(record.get('commit', 'unknown'))[:7]}; read it there "
            f"(git checkout {str(record.get('commit', '<commit>'))[:7]} -- benchmarks/posttrain.py)"
        )
    for line in acceptance_lines({**record, "cells": stats.revive(record["cells"])}):
        print(line)
