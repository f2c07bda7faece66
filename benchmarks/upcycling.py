"""Execution-horizon upcycling against the fixed horizon, on two tasks.

    python benchmarks/upcycling.py [--episodes 50] [--tasks reach pick_place]

For each task: the SFT checkpoint of ``benchmarks/sft.py`` (``outputs/sft/<task>``; its
``upcycling.json`` holds the demo-calibrated threshold) is evaluated on the same episodes with the
preset's fixed horizon h0 and with upcycling from h0. Prints ``policy-call ratio: <x>`` (the smaller of the
tasks' fixed/upcycled calls per episode) and ``success within interval: yes|no`` (the upcycled success
inside the fixed horizon's 95% Wilson interval on every task) last; writes
benchmarks/results/upcycling.json and prints the markdown table (docs/results.md records it).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import sim  # noqa: F401
from sim.evaluation import EvalConfig, evaluate
from vla.checkpoint import read_config
from vla.data.reader import iter_episodes
from vla.runtime.config import DeployConfig
from vla.runtime.upcycling import UPCYCLING_FILE, UpcyclingConfig, calibration_from_actions

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
H0 = {"reach": 3, "pick_place": 3}  # the SFT presets' execution horizons
# Per-task deployment settings, chosen on held-out seeds (50000+, 30 episodes; docs/results.md), not on the
# evaluation seeds: tau quantile of the demos' velocity change, h* <= factor x h0, replan gate (None: off).
# Reach is short (about 5 calls at h0) and robust to longer chunks; pick-and-place loses grasps beyond 2 h0.
SETTINGS: dict[str, dict[str, float | None]] = {
    "reach": {"quantile": 0.9, "max_factor": 4.0, "replan_tolerance": 0.3},
    "pick_place": {"quantile": 0.5, "max_factor": 2.0, "replan_tolerance": None},
}
DEFAULT = {"quantile": 0.5, "max_factor": 2.0, "replan_tolerance": None}


def per_task(values: list[str] | None, name: str, tasks: list[str]) -> dict[str, float | None]:
    """``["0.5"]`` (every task) or ``["reach=0.9", "pick_place=0.5"]``; missing tasks keep SETTINGS."""
    out = {t: SETTINGS.get(t, DEFAULT)[name] for t in tasks}
    for v in values or []:
        task, _, value = v.rpartition("=")
        for t in [task] if task else tasks:
            out[t] = None if value.lower() == "none" else float(value)
    return out


def calibrate(ckpt: Path, demos: Path, control_hz: float = 10.0) -> None:
    """Write the demo calibration into ``ckpt`` (what vla-train does at every save)."""
    actions = [ep["action"] for _, ep in iter_episodes(demos, keys=["action"])]
    ends = np.repeat(np.cumsum([len(a) for a in actions]), [len(a) for a in actions])
    calib = calibration_from_actions(
        np.concatenate(actions), ends, int(read_config(ckpt)["chunk_size"]), 1 / control_hz
    )
    (ckpt / UPCYCLING_FILE).write_text(json.dumps(calib))
    print(f"calibrated {ckpt / UPCYCLING_FILE} from {demos}: tau={calib['tau']:.3g}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=["reach", "pick_place"])
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument(
        "--checkpoint-root",
        default="outputs/sft",
        help="<root>/<task>/train/checkpoints/last (benchmarks/sft.py)",
    )
    p.add_argument(
        "--quantile", nargs="+", help="tau = this quantile of the demos' velocity change (x or task=x)"
    )
    p.add_argument("--max-factor", nargs="+", help="h* <= max_factor x h0 (x or task=x)")
    p.add_argument(
        "--replan-tolerance",
        nargs="+",
        help="replan gate: a chunk farther than this (RMS, demo-std units) from the previous chunk's "
        "discarded tail runs h0 only (x, task=x, or none)",
    )
    p.add_argument("--seed", type=int, default=30_000, help="first evaluation seed")
    p.add_argument("--tag", default=None, help="results file upcycling_<tag>.json (default upcycling.json)")
    args = p.parse_args()
    quantile = per_task(args.quantile, "quantile", args.tasks)
    factor = per_task(args.max_factor, "max_factor", args.tasks)
    gate = per_task(args.replan_tolerance, "replan_tolerance", args.tasks)
    rows, ratios, inside = [], [], []
    for task in args.tasks:
        ckpt = Path(args.checkpoint_root) / task / "train" / "checkpoints" / "last"
        if not ckpt.is_dir():
            raise FileNotFoundError(f"{ckpt}: run python benchmarks/sft.py --task {task} first")
        have = json.loads((ckpt / UPCYCLING_FILE).read_text()) if (ckpt / UPCYCLING_FILE).is_file() else {}
        if "taus" not in have:  # checkpoints from before vla-train wrote it (or its quantile table)
            calibrate(ckpt, Path(args.checkpoint_root) / task / "demos")
        res = {}
        for name, up in (("fixed", False), ("upcycled", True)):
            r = evaluate(
                EvalConfig(
                    checkpoint=str(ckpt),
                    task=task,
                    episodes=args.episodes,
                    workers=2,
                    seed=args.seed,
                    deploy=DeployConfig(
                        horizon=H0.get(task, 10),
                        upcycling=UpcyclingConfig(
                            enabled=up,
                            quantile=quantile[task] if up else 0.95,
                            max_horizon=round(factor[task] * H0.get(task, 10)) if up else None,
                            replan_tolerance=gate[task] if up else None,
                        ),
                    ),
                    out=f"outputs/bench_upcycling/{task}_{name}_{args.seed}",
                    videos=0,
                    progress=False,
                )
            )
            res[name] = {
                "success": r.successes,
                "episodes": r.n,
                "ci95": list(r.ci95),
                "calls_per_episode": r.calls_per_episode,
                "mean_length": r.mean_length,
                "mean_horizon": sum(e.mean_horizon for e in r.episodes) / r.n,
            }
            print(f"{task} {name}: {r.successes}/{r.n}, {r.calls_per_episode:.1f} calls/episode")
        ratio = res["fixed"]["calls_per_episode"] / res["upcycled"]["calls_per_episode"]
        lo, hi = res["fixed"]["ci95"]
        ok = lo <= res["upcycled"]["success"] / res["upcycled"]["episodes"] <= hi
        ratios.append(ratio)
        inside.append(ok)
        settings = {"quantile": quantile[task], "max_factor": factor[task], "replan_tolerance": gate[task]}
        rows.append(
            {
                "task": task,
                "h0": H0.get(task, 10),
                "settings": settings,
                **res,
                "call_ratio": ratio,
                "within_ci": ok,
            }
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "upcycling" + (f"_{args.tag}" if args.tag else "")
    (RESULTS / f"{name}.json").write_text(
        json.dumps({"args": vars(args), "rows": rows, "date": time.strftime("%Y-%m-%d %H:%M")}, indent=2)
    )
    lines = [
        "| task | h0 | settings (q, cap, gate) | fixed: success, calls/ep | upcycled: success, calls/ep, "
        "mean h* | call ratio | within CI |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        f, u, s = r["fixed"], r["upcycled"], r["settings"]
        lines.append(
            f"| {r['task']} | {r['h0']} | {s['quantile']}, {s['max_factor']:g} h0, {s['replan_tolerance']} "
            f"| {f['success']}/{f['episodes']}, {f['calls_per_episode']:.1f} "
            f"| {u['success']}/{u['episodes']}, {u['calls_per_episode']:.1f}, {u['mean_horizon']:.1f} "
            f"| {r['call_ratio']:.2f} | {'yes' if r['within_ci'] else 'no'} |"
        )
    print("\n".join(lines))
    print(f"policy-call ratio: {min(ratios):.2f}")
    print(f"success within interval: {'yes' if all(inside) else 'no'}")


if __name__ == "__main__":
    main()
