"""The main job: (1) expert demos of every task collected and replayed, (2) SFT of our flow-matching VLA on
expert demos of `reach`, evaluated in MuJoCo through the shared runtime. Prints both tables.

    make demo            (or: .venv/bin/python scripts/demo.py [--minutes 4] [--episodes 5])
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import sim  # noqa: F401
from sim.suite import collect_and_replay, markdown_table
from sim.tasks import TASKS

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=5, help="expert episodes per task for the replay check")
    p.add_argument("--out", default="outputs/demo")
    p.add_argument("--tasks", nargs="*", default=TASKS.names())
    p.add_argument("--sft-task", default="reach")
    p.add_argument("--sft-demos", type=int, default=100)
    p.add_argument("--minutes", type=float, default=3.0, help="SFT training budget")
    p.add_argument("--eval-episodes", type=int, default=20)
    args = p.parse_args()
    out = Path(args.out)

    print("== 1. expert demos: collect -> validate -> load -> replay ==")
    reports = [
        collect_and_replay(t, args.episodes, out / t, sheet=out / f"{t}_episode0.png") for t in args.tasks
    ]
    table = markdown_table(reports)
    print(table)

    print(
        f"\n== 2. SFT on {args.sft_demos} expert demos of {args.sft_task} "
        f"({args.minutes} min CPU), then evaluation =="
    )
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks/sft.py"),
        "--task",
        args.sft_task,
        "--episodes",
        str(args.sft_demos),
        "--minutes",
        str(args.minutes),
        "--eval-episodes",
        str(args.eval_episodes),
        "--out",
        str(out / "sft"),
        "--tag",
        "demo",
        "steps=1500",
        "progress=true",
    ]
    res = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    lines = res.stdout.strip().splitlines()
    sft_table = [ln for ln in lines if ln.startswith("|")]

    print("\n== summary ==")
    print(table)
    print()
    print("\n".join(sft_table))
    print(f"\ndatasets, contact sheets, checkpoint, eval videos: {out}/")
    print(lines[-1])


if __name__ == "__main__":
    main()
