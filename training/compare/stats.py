"""Statistics of a comparison over training seeds: means with 95% t-intervals, per round and paired by seed.

A *cell* is one lineage: one arm from one base seed and one training seed, through every round. Its
``rounds`` list holds one row per round's checkpoint (row 0 = the base) with ``success`` (%),
``time_to_success`` (control steps of the successful evaluation episodes), ``per_1000_steps`` (successes
per 1000 evaluation control steps), ``takeovers`` and ``operator_frames`` (per episode, from the
checkpoint's rollouts with the simulated operator) and, where measured, ``outcomes`` (``[success, steps,
episode seed]`` per evaluation episode).

Differences to a baseline are paired by training seed (the same rollout and evaluation seeds); time to
success is also compared on the evaluation episodes both arms succeed on (:func:`paired_time`): an arm that
succeeds less often could otherwise look faster by solving only the easy episodes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

T_975 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
NAN = float("nan")
Row = dict[str, Any]
PerSeed = list[dict[str, Row]]  # per training seed: arm -> that seed's final-round row


def mean_ci(values: Sequence[float | None]) -> tuple[float, float, float]:
    """Mean and a 95% t-interval (nan bounds with one value; nan and None values are left out)."""
    v = [float(x) for x in values if x is not None and not math.isnan(x)]
    n = len(v)
    if n == 0:
        return NAN, NAN, NAN
    m = sum(v) / n
    if n < 2:
        return m, NAN, NAN
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1))
    half = T_975.get(n - 1, 1.96) * sd / math.sqrt(n)
    return m, m - half, m + half


def row_metrics(row: dict[str, Any]) -> Row:
    """One ``rounds.json`` row (``training/closed_loop.py``) in the comparison's units."""

    def get(key: str, scale: float = 1.0) -> float:
        v = row.get(key)
        return NAN if v is None else scale * float(v)

    return {
        "round": row["round"],
        "success": get("success_rate", 100.0),
        "time_to_success": get("success_length_mean"),
        "per_1000_steps": get("successes_per_1000_steps"),
        "takeovers": get("takeovers_per_episode"),
        "operator_frames": get("operator_frames_per_episode"),
        "eval_episodes": row.get("eval_episodes"),
        "outcomes": row.get("outcomes", []),
    }


METRICS = ("success", "time_to_success", "per_1000_steps", "takeovers", "operator_frames")


def revive(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cells read back from a record: the metrics a record stores as null (JSON has no NaN) as nan again."""

    def row(r: dict[str, Any]) -> dict[str, Any]:
        return {k: NAN if k in METRICS and v is None else v for k, v in r.items()}

    return [{**c, "rounds": [row(r) for r in c["rounds"]]} for c in cells]


def final(cell: dict[str, Any]) -> Row:
    return cell["rounds"][-1]


def per_seed(cells: list[dict[str, Any]], base_seed: int = 0) -> PerSeed:
    """The final-round rows of ``base_seed``'s cells, one dict (arm -> row) per training seed."""
    seeds = sorted({c["seed"] for c in cells if c["base_seed"] == base_seed})
    return [
        {c["arm"]: final(c) for c in cells if c["base_seed"] == base_seed and c["seed"] == s} for s in seeds
    ]


def column(rows: PerSeed, arm: str, metric: str) -> list[float]:
    return [r[arm][metric] for r in rows if arm in r]


def paired(rows: PerSeed, a: str, b: str, metric: str) -> list[float]:
    return [r[a][metric] - r[b][metric] for r in rows if a in r and b in r]


def paired_time(rows: PerSeed, a: str, b: str) -> list[float]:
    """Per seed, the mean of (a's steps - b's steps) over the evaluation episodes both arms succeed on (the
    arms share their episode seeds): time to success without the selection of which episodes succeed."""
    out = []
    for row in rows:
        steps_b = {seed: n for ok, n, seed in row[b]["outcomes"] if ok}
        d = [n - steps_b[seed] for ok, n, seed in row[a]["outcomes"] if ok and seed in steps_b]
        out.append(sum(d) / len(d) if d else NAN)
    return out


def best(rows: PerSeed, arms: Sequence[str], metric: str, higher: bool = True) -> str:
    """The arm of ``arms`` with the best mean ``metric`` (ties: the first); nan means count as worst."""

    def score(arm: str) -> float:
        m = mean_ci(column(rows, arm, metric))[0]
        return -math.inf if math.isnan(m) else (m if higher else -m)

    return max(arms, key=score)


def ratio(rows: PerSeed, a: str, b: str, metric: str) -> float:
    """mean(a) / mean(b) over seeds (nan when b's mean is 0 or unknown)."""
    ma, mb = mean_ci(column(rows, a, metric))[0], mean_ci(column(rows, b, metric))[0]
    return NAN if math.isnan(mb) or mb == 0 else ma / mb


def summarise(rows: PerSeed, baselines: Sequence[str], arms: Sequence[str]) -> dict[str, Any]:
    """Per arm (baselines included), the final round's means over seeds and its differences to the best
    baseline, paired by seed: to the best by success for success, time and throughput, to the best by
    takeovers per episode for takeovers."""
    by_success = best(rows, baselines, "success")
    by_takeovers = best(rows, baselines, "takeovers", higher=False)
    out: dict[str, Any] = {"best_baseline": by_success, "best_baseline_takeovers": by_takeovers, "arms": {}}
    for a in arms:
        s: dict[str, Any] = {k: mean_ci(column(rows, a, k)) for k in METRICS}
        s |= {
            "lift_over_best_baseline": mean_ci(paired(rows, a, by_success, "success")),
            "takeovers_vs_best_baseline": mean_ci(paired(rows, a, by_takeovers, "takeovers")),
            "per_1000_steps_ratio": ratio(rows, a, by_success, "per_1000_steps"),
            "time_to_success_paired": mean_ci(paired_time(rows, a, by_success)),
        }
        out["arms"][a] = s
    return out


def by_round(
    cells: list[dict[str, Any]], arm: str, metric: str, base_seed: int = 0
) -> list[tuple[int, float, float, float]]:
    """``(round, mean, low, high)`` of ``metric`` over ``base_seed``'s training seeds, per round."""
    mine = [c for c in cells if c["arm"] == arm and c["base_seed"] == base_seed]
    rounds = sorted({r["round"] for c in mine for r in c["rounds"]})
    out = []
    for k in rounds:
        m, lo, hi = mean_ci([r[metric] for c in mine for r in c["rounds"] if r["round"] == k])
        if not math.isnan(m):
            out.append((k, m, lo, hi))
    return out


def base_share(cells: list[dict[str, Any]], arm: str, metric: str = "success") -> dict[str, Any] | None:
    """How much of ``arm``'s final-round variance the base seed explains: one-way random effects over base
    seeds (each with the same training seeds). ``var_base = max(0, (MS_between - MS_within) / n)``,
    ``share = var_base / (var_base + MS_within)``. None with fewer than two base seeds or seeds."""
    groups: dict[int, list[float]] = {}
    for c in cells:
        if c["arm"] == arm:
            groups.setdefault(c["base_seed"], []).append(final(c)[metric])
    groups = {b: [v for v in g if not math.isnan(v)] for b, g in groups.items()}
    n = min((len(g) for g in groups.values()), default=0)
    if len(groups) < 2 or n < 2:
        return None
    groups = {b: g[:n] for b, g in groups.items()}
    means = {b: sum(g) / n for b, g in groups.items()}
    grand = sum(means.values()) / len(means)
    ms_between = n * sum((m - grand) ** 2 for m in means.values()) / (len(means) - 1)
    ms_within = sum((v - means[b]) ** 2 for b, g in groups.items() for v in g) / (len(means) * (n - 1))
    var_base = max(0.0, (ms_between - ms_within) / n)
    total = var_base + ms_within
    return {
        "base_means": [means[b] for b in sorted(means)],
        "var_base": var_base,
        "var_seed": ms_within,
        "share": NAN if total == 0 else var_base / total,
    }
