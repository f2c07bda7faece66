"""The main job at this stage: collect expert demos of every task, replay them open loop, print a table.

make demo            (or: .venv/bin/python scripts/demo.py --episodes 10 --out outputs/demo)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import sim  # noqa: F401
from sim.suite import collect_and_replay, markdown_table
from sim.tasks import TASKS


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--out", default="outputs/demo")
    p.add_argument("--tasks", nargs="*", default=TASKS.names())
    args = p.parse_args()
    out = Path(args.out)
    reports = [
        collect_and_replay(t, args.episodes, out / t, sheet=out / f"{t}_episode0.png") for t in args.tasks
    ]
    print()
    print(markdown_table(reports))
    print(f"\ndatasets and contact sheets (episode 0 of each task) in {out}/")


if __name__ == "__main__":
    main()
