"""Acceptance sweep: for every task, collect N expert episodes, replay them, load with LeRobotDataset.

    python benchmarks/expert_suite.py [--episodes 100] [--out outputs/expert_suite] [--tasks reach ...]

Writes benchmarks/results/expert_suite.json and .md; prints the table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import sim  # noqa: F401
from sim.collect import CollectConfig, collect
from sim.env import EnvConfig
from sim.replay import ReplayConfig, replay
from sim.tasks import TASKS
from vla.data.reader import open_dataset
from vla.data.validate import validate_dataset

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--out", default="outputs/expert_suite")
    p.add_argument("--tasks", nargs="*", default=TASKS.names())
    args = p.parse_args()
    rows = []
    for task in args.tasks:
        root = Path(args.out) / task
        shutil.rmtree(root, ignore_errors=True)
        t0 = time.perf_counter()
        k, n, _ = collect(
            CollectConfig(task=task, episodes=args.episodes, out=str(root), env=EnvConfig(task=task))
        )
        t_collect = time.perf_counter() - t0
        validate_dataset(root)
        loaded = open_dataset(root).num_episodes
        r, m = replay(ReplayConfig(dataset=str(root)))
        rows.append(
            {
                "task": task,
                "expert_success": k,
                "episodes": n,
                "replay_success": r,
                "replayed": m,
                "lerobot_episodes": loaded,
                "collect_s": round(t_collect, 1),
            }
        )
        print(rows[-1])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "expert_suite.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        "| task | expert success | replay success | LeRobotDataset episodes | collect time (s) |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['task']} | {r['expert_success']}/{r['episodes']} | {r['replay_success']}/{r['replayed']} | "
        f"{r['lerobot_episodes']} | {r['collect_s']} |"
        for r in rows
    ]
    (RESULTS / "expert_suite.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
