"""Compaction: repack a dataset's per-episode files into LeRobot v3's packed layout, crash-safe.

The writer commits one parquet, one metadata file and one video per camera per episode (valid v3, durable
episode by episode), so 10,000 episodes are tens of thousands of small files, which v3's packed layout
exists to avoid. :func:`compact` packs the frame data into parquet files of up to ``data_mb`` each (one
row group per episode, as LeRobot writes them) and the episode table into one file, updating each episode's
``data/chunk_index`` / ``data/file_index``; the frame indices, videos, ``info.json``, stats, tasks and our
sidecar are carried over unchanged (``info.json`` keeps the writer's per-episode file size, so episodes
appended later are committed one by one as before).

Why not LeRobot's ``aggregate_datasets``: it appends each source file by reading the growing destination file
back and rewriting it, so packing N per-episode files costs O(N^2) (300 episodes took over 10 minutes here).
Videos stay one file per episode and camera: packing them is not implemented.

    vla-compact <dataset> [--data-mb 100]
    vla-collect ... compact=true                        # at the end of a collection

Crash safety: the packed copy is built beside the dataset (``.<name>.compacting``), checked episode by
episode against the original (lengths, outcomes, sources, every frame's state and action), then swapped in
with two renames (the original becomes ``.<name>.precompact`` for the instant between them, then is
deleted). Killed at any point before the swap, the original is untouched and the next run starts over;
killed between the renames, the next :func:`compact` (or :func:`restore`) puts the original back.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vla.data.layout import EPISODES_DIR, chunk_file_of, data_files, episode_meta_files
from vla.data.reader import read_episode_info
from vla.errors import InputError
from vla.lock import folder_lock

DATA_MB = 100.0  # LeRobot's default data file size (DEFAULT_DATA_FILE_SIZE_IN_MB)


def _pack(root: Path, building: Path, data_mb: float) -> None:
    """``root``'s data in files of up to ``data_mb`` and its episode table in one file, in ``building``."""
    info = json.loads((root / "meta" / "info.json").read_text())
    data_path, files_per_chunk = info["data_path"], int(info.get("chunks_size", 1000))
    packed = {(root, "data"), (root / "meta", "episodes")}  # written below; the rest is copied as it is
    shutil.copytree(root, building, ignore=lambda d, names: [n for n in names if (Path(d), n) in packed])
    where: dict[tuple[int, int], tuple[int, int]] = {}  # source (chunk, file) -> packed (chunk, file)
    chunk, file, size, writer = 0, 0, 0, None
    try:
        for src in data_files(root):
            if writer is not None and size + src.stat().st_size > data_mb * 1e6:
                writer.close()
                writer, size = None, 0
                file += 1
                if file == files_per_chunk:
                    chunk, file = chunk + 1, 0
            table = pq.read_table(src)
            if writer is None:
                dst = building / data_path.format(chunk_index=chunk, file_index=file)
                dst.parent.mkdir(parents=True, exist_ok=True)
                writer = pq.ParquetWriter(dst, table.schema)
            for episode in _by_episode(table):  # one row group per episode, as LeRobot writes them
                writer.write_table(episode)
            size += src.stat().st_size
            where[chunk_file_of(src)] = (chunk, file)
    finally:
        if writer is not None:
            writer.close()
    tables = [pq.read_table(p) for p in episode_meta_files(root)]
    meta = pa.concat_tables(tables, promote_options="default") if tables else None
    if meta is None:
        return
    old = zip(meta["data/chunk_index"].to_pylist(), meta["data/file_index"].to_pylist(), strict=True)
    new = [where[(int(c), int(f))] for c, f in old]
    meta = _set(meta, "data/chunk_index", [c for c, _ in new])
    meta = _set(meta, "data/file_index", [f for _, f in new])
    meta = _set(meta, "meta/episodes/chunk_index", [0] * meta.num_rows)
    meta = _set(meta, "meta/episodes/file_index", [0] * meta.num_rows)
    meta = meta.sort_by("episode_index")
    dst = building / EPISODES_DIR / "chunk-000" / "file-000.parquet"
    dst.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(meta, dst)


def _by_episode(table: pa.Table) -> list[pa.Table]:
    """``table``'s rows split by ``episode_index`` (contiguous runs)."""
    ids = table["episode_index"].to_numpy()
    cuts = [0, *(np.flatnonzero(np.diff(ids)) + 1).tolist(), len(ids)]
    return [table.slice(a, b - a) for a, b in itertools.pairwise(cuts) if b > a]


def _set(table: pa.Table, name: str, values: list[int]) -> pa.Table:
    i = table.schema.get_field_index(name)
    return table.set_column(i, table.schema.field(i), pa.array(values, type=table.schema.field(i).type))


CHECKED = ("index", "episode_index", "observation.state", "action")  # compared frame by frame


@dataclass
class CompactionReport:
    root: Path
    episodes: int
    files_before: int
    files_after: int
    seconds: float

    def line(self) -> str:
        return (
            f"{self.root}: {self.episodes} episodes, files: {self.files_before} -> {self.files_after} "
            f"({self.seconds:.1f} s)"
        )


def file_count(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if p.is_file())


def _siblings(root: Path) -> tuple[Path, Path]:
    return root.parent / f".{root.name}.compacting", root.parent / f".{root.name}.precompact"


def restore(root: str | Path) -> list[str]:
    """Finish or undo what a killed compaction left: the original put back if the swap was cut between its
    renames, a half-built copy or a swapped-out original removed. Returns what it did."""
    root = Path(root)
    building, old = _siblings(root)
    done = []
    if old.exists() and not root.exists():
        old.rename(root)
        done.append(f"{root}: put back from {old.name} (a compaction was killed mid-swap)")
    elif old.exists():
        shutil.rmtree(old)
        done.append(f"{old}: removed (the packed copy had been swapped in)")
    if building.exists():
        shutil.rmtree(building)
        done.append(f"{building}: removed (an unfinished packed copy)")
    return done


def _frames(root: Path) -> pa.Table:
    """Every frame's index, episode, state and action (those present), in frame order."""
    tables = []
    for path in data_files(root):
        names = pq.read_schema(path).names
        tables.append(pq.read_table(path, columns=[c for c in CHECKED if c in names]))
    return pa.concat_tables(tables).sort_by("index")


def _check_same(original: Path, packed: Path) -> None:
    """``packed`` holds ``original``'s episodes (lengths, outcomes, sources, tasks) and frames (index,
    episode, state, action), read in bulk."""
    a, b = read_episode_info(original), read_episode_info(packed)
    if a != b:
        raise InputError(f"{packed}: the episode table differs after packing; the original is kept")
    fa, fb = _frames(original), _frames(packed)
    if not fa.equals(fb):
        raise InputError(f"{packed}: the frames differ after packing; the original is kept")


def compact(root: str | Path, *, data_mb: float = DATA_MB) -> CompactionReport:
    """Repack ``root`` in place (see the module docstring); holds the dataset's writer lock throughout.

    Raises:
        InputError: ``root`` is not a dataset, or the packed copy does not match it (the original is kept).
        FolderBusyError: A writer (or another compaction) holds the dataset.
    """
    root = Path(root)
    for line in restore(root):
        print(line)
    if not (root / "meta" / "info.json").exists():
        raise InputError(f"{root}: not a LeRobot dataset (no meta/info.json)")
    t0 = time.time()
    building, old = _siblings(root)
    with folder_lock(root, "compacting"):
        before = file_count(root)
        shutil.rmtree(building, ignore_errors=True)
        _pack(root, building, data_mb)
        _check_same(root, building)
        episodes = len(read_episode_info(building))
        root.rename(old)
        building.rename(root)
    shutil.rmtree(old)
    return CompactionReport(root, episodes, before, file_count(root), time.time() - t0)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="vla-compact", description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", type=Path)
    p.add_argument("--data-mb", type=float, default=DATA_MB, help="data file size limit in MB")
    args = p.parse_args(argv)
    try:
        print(compact(args.dataset, data_mb=args.data_mb).line())
    except InputError as e:
        sys.exit(f"vla-compact: {e}")
