"""Jerk of executed trajectories with and without real-time chunking, under asynchronous inference.

    python benchmarks/rtc_jerk.py [--tasks reach pick_place] [--delay 3] [--horizon 6] [--episodes 30]

Inference runs "in the background" with a simulated delay of d control steps (what a real robot sees);
each new chunk is spliced in at its delay. Without RTC the splice can jump; with RTC the new chunk
inpaints the committed actions. Reports mean squared jerk of the executed arm trajectories and success;
writes benchmarks/results/rtc_jerk.json and prints ``jerk ratio (rtc / none): <x>`` last.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import sim  # noqa: F401
from sim.evaluation import EvalConfig, evaluate

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=["reach", "pick_place"])
    p.add_argument("--delay", type=int, default=3)
    p.add_argument("--horizon", type=int, default=6)
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--checkpoint-root", default="outputs/sft")
    args = p.parse_args()
    rows, ratios = [], []
    for task in args.tasks:
        ckpt = Path(args.checkpoint_root) / task / "train" / "checkpoints" / "last"
        res = {}
        for rtc in (False, True):
            r = evaluate(
                EvalConfig(
                    checkpoint=str(ckpt),
                    task=task,
                    episodes=args.episodes,
                    workers=2,
                    seed=50_000,
                    horizon=args.horizon,
                    async_delay=args.delay,
                    rtc=rtc,
                    out=f"outputs/bench_rtc/{task}_{'rtc' if rtc else 'none'}",
                    videos=0,
                    progress=False,
                )
            )
            res["rtc" if rtc else "none"] = {
                "success": r.successes,
                "episodes": r.n,
                "jerk": r.summary()["mean_jerk"],
            }
            print(f"{task} rtc={rtc}: {r.successes}/{r.n}, mean squared jerk {r.summary()['mean_jerk']:.4g}")
        ratios.append(res["rtc"]["jerk"] / max(res["none"]["jerk"], 1e-12))
        rows.append({"task": task, **res})
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "rtc_jerk.json").write_text(
        json.dumps({"args": vars(args), "rows": rows, "date": time.strftime("%Y-%m-%d %H:%M")}, indent=2)
    )
    print(f"jerk ratio (rtc / none): {max(ratios):.2f}")


if __name__ == "__main__":
    main()
