"""Acceptance sweep: for every task, collect N expert episodes, replay them, load with LeRobotDataset.

    python benchmarks/expert_suite.py [--episodes 100] [--out outputs/expert_suite] [--tasks reach ...]

Writes benchmarks/results/expert_suite.json and .md; prints the table.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

import sim  # noqa: F401
from sim.suite import collect_and_replay, markdown_table
from sim.tasks import TASKS

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--out", default="outputs/expert_suite")
    p.add_argument("--tasks", nargs="*", default=TASKS.names())
    args = p.parse_args()
    reports = []
    for task in args.tasks:
        reports.append(collect_and_replay(task, args.episodes, Path(args.out) / task))
        print(reports[-1])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "expert_suite.json").write_text(json.dumps([asdict(r) for r in reports], indent=2) + "\n")
    table = markdown_table(reports)
    (RESULTS / "expert_suite.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
