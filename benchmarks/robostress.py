"""Self-compensation on the seven RoboStress scenarios (and nominal), on and off.

    python benchmarks/robostress.py [--task reach] [--episodes 30] [--severity 1.0]

The SFT checkpoint of ``benchmarks/sft.py`` runs on each stressed robot with online self-compensation
off and on (the compensator learns across a worker's episodes, from the first, reward-free). Prints
``compensation lift: <points>`` (mean success over the seven scenarios, on - off) and
``nominal drop: <points>`` (success without stress, off - on) last; writes
benchmarks/results/robostress.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import sim  # noqa: F401
from sim.evaluation import EvalConfig, evaluate
from sim.robostress import SCENARIOS, StressConfig
from vla.runtime.compensation import CompensationConfig
from vla.runtime.config import DeployConfig

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="reach")
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--severity", type=float, default=1.0)
    p.add_argument("--horizon", type=int, default=3)
    p.add_argument("--tag", default=None, help="results file robostress_<tag>.json (default robostress.json)")
    p.add_argument(
        "--checkpoint",
        default=None,
        help="default outputs/sft/<task>/train/checkpoints/last (benchmarks/sft.py)",
    )
    args = p.parse_args()
    ckpt = Path(args.checkpoint or f"outputs/sft/{args.task}/train/checkpoints/last")
    table: dict[str, dict[str, float]] = {}
    for scenario in [None, *SCENARIOS]:
        name = scenario or "nominal"
        table[name] = {}
        for comp in (False, True):
            r = evaluate(
                EvalConfig(
                    checkpoint=str(ckpt),
                    task=args.task,
                    episodes=args.episodes,
                    workers=2,
                    seed=40_000,
                    stress=StressConfig(scenario, args.severity),
                    deploy=DeployConfig(
                        horizon=args.horizon,
                        compensation=CompensationConfig(enabled=comp),
                    ),
                    out=f"outputs/bench_robostress/{name}_{'on' if comp else 'off'}",
                    videos=0,
                    progress=False,
                )
            )
            table[name]["on" if comp else "off"] = 100 * r.success_rate
            print(f"{name:11s} compensation {'on ' if comp else 'off'}: {r.successes}/{r.n}", flush=True)
    stressed = [s for s in table if s != "nominal"]
    lift = sum(table[s]["on"] - table[s]["off"] for s in stressed) / len(stressed)
    drop = table["nominal"]["off"] - table["nominal"]["on"]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / ("robostress" + (f"_{args.tag}" if args.tag else "") + ".json")).write_text(
        json.dumps(
            {
                "args": vars(args),
                "success_percent": table,
                "lift": lift,
                "nominal_drop": drop,
                "date": time.strftime("%Y-%m-%d %H:%M"),
            },
            indent=2,
        )
    )
    print("| scenario | off | on |\n|---|---|---|")
    for s, v in table.items():
        print(f"| {s} | {v['off']:.0f}% | {v['on']:.0f}% |")
    print(f"compensation lift: {lift:.1f}")
    print(f"nominal drop: {drop:.1f}")


if __name__ == "__main__":
    main()
