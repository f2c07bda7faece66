"""Datasets at scale: file count, open time and training-loader throughput before and after compaction.

    python benchmarks/dataset_compaction.py                  # 10,000 synthetic episodes (state only)
    python benchmarks/dataset_compaction.py --episodes 1000  # a smaller run (--tag names its record)

Writes a synthetic dataset with the episode writer (one parquet and one metadata file per episode, as a
collection leaves it; 20 frames of an 8-d state and action each, no cameras, so the numbers are the layout's
and not a video decoder's), then measures it, compacts it (``vla.data.compact``) and measures it again:

- ``files``: files under the dataset root;
- ``open seconds``: our reader's episode table plus LeRobot's ``LeRobotDataset`` opening the dataset;
- ``loader``: ``training.data.ChunkDataset`` loading every episode (what ``vla-train`` does before its first
  step), in frames per second.

Prints ``files: a -> b`` and ``open seconds: x -> y``; writes ``benchmarks/results/dataset_compaction.json``.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np
from _provenance import ROOT, write_record
from tqdm import tqdm

from vla.data.compact import compact, file_count
from vla.data.reader import read_episode_info
from vla.data.schema import EpisodeSpec
from vla.data.writer import EpisodeWriter

FRAMES = 20


def synthesise(root: Path, episodes: int) -> None:
    spec = EpisodeSpec(cameras={}, state_dim=8, action_dim=8, fps=10)
    rng = np.random.default_rng(0)
    with EpisodeWriter(root, spec, durable=False) as w:
        for e in tqdm(range(episodes), desc="writing episodes", unit="ep"):
            for t in range(FRAMES):
                state = rng.normal(size=8).astype(np.float32)
                w.add_frame(
                    {
                        "observation.state": state,
                        "action": state,
                        "complementary_info.policy_action": state,
                        "complementary_info.is_intervention": np.array([False]),
                        "next.reward": np.array([float(t == FRAMES - 1)], dtype=np.float32),
                        "next.done": np.array([t == FRAMES - 1]),
                        "task": "synthetic",
                    }
                )
            w.end_episode(success=bool(e % 2), source="policy")


def open_seconds(root: Path) -> float:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    t0 = time.perf_counter()
    read_episode_info(root)
    LeRobotDataset(f"local/{root.name}", root=root)
    return time.perf_counter() - t0


def loader_fps(root: Path) -> float:
    from training.data import ChunkDataset, DataConfig

    t0 = time.perf_counter()
    data = ChunkDataset(DataConfig(roots=[str(root)], random_shift=0), [], 10, progress=False)
    return len(data) / (time.perf_counter() - t0)


def measure(root: Path) -> dict[str, float]:
    return {"files": file_count(root), "open_seconds": open_seconds(root), "loader_fps": loader_fps(root)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=10_000)
    p.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench_compaction")
    p.add_argument("--tag", default=None, help="record as dataset_compaction_<tag>.json (an experiment)")
    args = p.parse_args()
    started = time.time()
    root = args.out / f"synthetic_{args.episodes}"
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    t0 = time.time()
    synthesise(root, args.episodes)
    write_minutes = (time.time() - t0) / 60
    before = measure(root)
    report = compact(root)
    after = measure(root)
    print(f"episodes: {args.episodes} x {FRAMES} frames (written in {write_minutes:.1f} min)")
    print(f"files: {before['files']} -> {after['files']}")
    print(f"open seconds: {before['open_seconds']:.2f} -> {after['open_seconds']:.2f}")
    print(f"loader frames/s: {before['loader_fps']:.0f} -> {after['loader_fps']:.0f}")
    print(f"compaction: {report.seconds / 60:.1f} min")
    record = {
        "episodes": args.episodes,
        "frames_per_episode": FRAMES,
        "before": before,
        "after": after,
        "compaction_minutes": round(report.seconds / 60, 2),
        "write_minutes": round(write_minutes, 2),
    }
    name = "dataset_compaction" + (f"_{args.tag}" if args.tag else "")
    print(f"record: {write_record(name, record, started)}")


if __name__ == "__main__":
    main()
