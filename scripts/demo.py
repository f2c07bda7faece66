"""The main job at this stage: collect expert demos of every task, replay them open loop, print a table.

make demo            (or: .venv/bin/python scripts/demo.py --episodes 10 --out outputs/demo)
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import sim  # noqa: F401
from sim.collect import CollectConfig, collect
from sim.env import EnvConfig
from sim.replay import ReplayConfig, replay
from sim.tasks import TASKS
from vla.data.reader import open_dataset, read_episode_info
from vla.data.validate import validate_dataset


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--out", default="outputs/demo")
    p.add_argument("--tasks", nargs="*", default=TASKS.names())
    args = p.parse_args()
    out = Path(args.out)
    rows = []
    for task in args.tasks:
        root = out / task
        shutil.rmtree(root, ignore_errors=True)
        t0 = time.perf_counter()
        k, n, _ = collect(
            CollectConfig(task=task, episodes=args.episodes, out=str(root), seed=0, env=EnvConfig(task=task))
        )
        t_collect = time.perf_counter() - t0
        validate_dataset(root)
        loaded = open_dataset(root).num_episodes
        sheet = out / f"{task}_episode0.png"
        r, m = replay(ReplayConfig(dataset=str(root), sheet=str(sheet)))
        steps = sum(i.length for i in read_episode_info(root)) / max(loaded, 1)
        rows.append((task, loaded, f"{k}/{n}", f"{r}/{m}", f"{steps:.0f}", f"{t_collect:.1f}"))
    header = ("task", "episodes", "expert success", "replay success", "steps/ep", "collect s")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"  # noqa: E731
    print()
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print(line(row))
    print(f"\ndatasets and contact sheets in {out}/")


if __name__ == "__main__":
    main()
