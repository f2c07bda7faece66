"""Jerk and success with and without real-time chunking, under asynchronous inference.

    python benchmarks/rtc_jerk.py [--tasks reach pick_place] [--delay 3] [--horizon 6] [--episodes 50]

Inference runs "in the background" with a simulated delay of d control steps (what a real robot sees);
each new chunk is spliced in at its delay. Without RTC the splice can jump; with RTC
(``deploy.rtc.enabled``, its default prefix) the new chunk inpaints the actions still committed from
the previous one. Checkpoints: the SFT benchmark's (``python benchmarks/sft.py --task <task>``).

Reporting seeds start at 50000; the RTC settings were chosen on seeds 60000+ (``--seed`` to re-run the
tuning range; docs/results.md). Prints, per task, success with its Wilson interval and the mean squared
jerk, then ``jerk ratio: <x>`` (RTC / no RTC, the worst task) and, last, ``rtc success within interval:
yes|no`` (RTC's success rate at or above the lower end of the no-RTC interval on every task). Writes
``benchmarks/results/rtc_jerk.json``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict
from pathlib import Path

from _provenance import write_record

import sim  # noqa: F401
from sim.evaluation import EvalConfig, evaluate
from vla.runtime.config import AsyncConfig, DeployConfig, RTCConfig


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=["reach", "pick_place"])
    p.add_argument("--delay", type=int, default=3)
    p.add_argument("--horizon", type=int, default=6)
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument("--seed", type=int, default=50_000, help="first episode seed (reporting range: 50000+)")
    p.add_argument("--checkpoint-root", default="outputs/sft")
    args = p.parse_args()
    started = time.time()
    rows, ratios, within = [], [], []
    for task in args.tasks:
        ckpt = Path(args.checkpoint_root) / task / "train" / "checkpoints" / "last"
        if not (ckpt / "model.safetensors").is_file():
            raise SystemExit(f"no checkpoint at {ckpt}: run python benchmarks/sft.py --task {task} first")
        res = {}
        for rtc in (False, True):
            deploy = DeployConfig(
                horizon=args.horizon,
                async_inference=AsyncConfig(enabled=True, simulated_delay=args.delay),
                rtc=RTCConfig(enabled=rtc),
            )
            r = evaluate(
                EvalConfig(
                    checkpoint=str(ckpt),
                    task=task,
                    episodes=args.episodes,
                    workers=2,
                    seed=args.seed,
                    deploy=deploy,
                    out=f"outputs/bench_rtc/{task}_{'rtc' if rtc else 'none'}",
                    videos=0,
                    progress=False,
                )
            )
            lo, hi = r.ci95
            res["rtc" if rtc else "none"] = {
                "success": r.successes,
                "episodes": r.n,
                "ci95": [lo, hi],
                "jerk": r.summary()["mean_jerk"],
                "mean_length": r.mean_length,
                "rtc": asdict(deploy.rtc),
            }
            print(
                f"{task} rtc={rtc}: success {r.successes}/{r.n} [{lo:.2f}, {hi:.2f}], "
                f"mean squared jerk {r.summary()['mean_jerk']:.4g}",
                flush=True,
            )
        none, rtc_res = res["none"], res["rtc"]
        ratios.append(rtc_res["jerk"] / max(none["jerk"], 1e-12))
        within.append(rtc_res["success"] / rtc_res["episodes"] >= none["ci95"][0])
        rows.append({"task": task, **res, "jerk_ratio": ratios[-1], "rtc_within_interval": within[-1]})
    write_record("rtc_jerk", {"args": vars(args), "rows": rows}, started)
    print(f"jerk ratio: {max(ratios):.2f}")
    print(f"rtc success within interval: {'yes' if all(within) else 'no'}")


if __name__ == "__main__":
    main()
