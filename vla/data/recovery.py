"""Crash recovery: bring a dataset back to exactly the episodes committed in the sidecar.

The writer gives every episode its own data/metadata/video files and closes them before the sidecar
line is appended (see :mod:`vla.data.writer`). After a crash the dataset can therefore hold, beyond the
committed episodes: an unfinished (footer-less) parquet file, a closed file of an episode whose sidecar
line was never written, staging PNGs under ``images/``, encoder temp dirs, and ``info.json`` /
``stats.json`` / ``tasks.parquet`` already counting the uncommitted episode (or torn mid-write).
:func:`repair_dataset` deletes the former and rebuilds the latter from the committed episodes' rows
of lerobot's own episode table, writing each file atomically, so it is idempotent and itself safe to
interrupt.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from lerobot.datasets.compute_stats import aggregate_stats
from lerobot.datasets.io_utils import load_info, load_stats, load_tasks, write_info, write_stats, write_tasks
from lerobot.datasets.utils import DEFAULT_TASKS_PATH, INFO_PATH, STATS_PATH, DatasetInfo

from vla.data._fs import atomic_write_bytes, fsync_dir
from vla.data.errors import DatasetError
from vla.data.layout import chunk_file_of, data_files, episode_meta_files
from vla.data.sidecar import read_sidecar_raw, truncate_sidecar

logger = logging.getLogger(__name__)

INFO_BACKUP_FILE = "meta/vla_info_backup.json"


def backup_info(root: Path) -> None:
    """Atomically copies ``meta/info.json`` to the backup used if info.json is ever torn."""
    atomic_write_bytes(root / INFO_BACKUP_FILE, (root / INFO_PATH).read_bytes())


def _load_info_or_backup(root: Path, report: list[str]) -> DatasetInfo:
    try:
        return load_info(root)
    except (OSError, ValueError, TypeError, KeyError):
        pass
    backup = root / INFO_BACKUP_FILE
    if not backup.exists():
        raise DatasetError(f"{root / INFO_PATH}: unreadable and no backup at {backup}; cannot repair")
    report.append(f"{INFO_PATH}: unreadable, restored from {INFO_BACKUP_FILE}")
    return DatasetInfo.from_dict(json.loads(backup.read_text()))


def _write_lerobot_file(root: Path, rel: str, writer: Any, obj: Any) -> None:
    """Writes ``obj`` with a lerobot writer into a temp root, then renames it into place atomically."""
    tmp_root = Path(tempfile.mkdtemp(dir=root, prefix=".vla_repair_"))
    try:
        writer(obj, tmp_root)
        os.replace(tmp_root / rel, root / rel)
        fsync_dir((root / rel).parent)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)


def _filter_episode_meta(root: Path, k: int, report: list[str]) -> list[dict[str, Any]]:
    """Drops metadata rows of uncommitted episodes (index >= k) and unreadable files; returns kept rows."""
    rows: list[dict[str, Any]] = []
    for path in episode_meta_files(root):
        rel = path.relative_to(root)
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowInvalid):
            path.unlink()
            report.append(f"{rel}: unreadable (unfinished write), deleted")
            continue
        indices = table.column("episode_index").to_pylist()
        keep = [int(i) < k for i in indices]
        if not all(keep):
            dropped = [i for i, kp in zip(indices, keep, strict=True) if not kp]
            if any(keep):
                tmp = path.with_name(f".{path.name}.tmp")
                pq.write_table(table.filter(pa.array(keep)), tmp)
                os.replace(tmp, path)
            else:
                path.unlink()
            report.append(f"{rel}: dropped uncommitted episode(s) {dropped}")
            table = table.filter(pa.array(keep))
        rows.extend(table.to_pylist())
    rows.sort(key=lambda r: int(r["episode_index"]))
    found = [int(r["episode_index"]) for r in rows]
    if found != list(range(k)):
        missing = sorted(set(range(k)) - set(found))
        raise DatasetError(
            f"{root / 'meta/episodes'}: sidecar commits episodes 0..{k - 1} but lerobot metadata "
            f"lacks episode(s) {missing} (found {found}); this is not a crash artefact, refusing to repair"
        )
    return rows


def _drop_unreferenced_files(
    root: Path, rows: list[dict[str, Any]], info: DatasetInfo, report: list[str]
) -> None:
    refs = {(int(r["data/chunk_index"]), int(r["data/file_index"])) for r in rows}
    for path in data_files(root):
        if chunk_file_of(path) not in refs:
            path.unlink()
            report.append(f"{path.relative_to(root)}: data of an uncommitted episode, deleted")
        else:
            try:
                pq.read_metadata(path)
            except (OSError, pa.ArrowInvalid) as e:
                raise DatasetError(f"{path}: data file of a committed episode is unreadable: {e}") from e
    for key, ft in info.features.items():
        if ft["dtype"] != "video":
            continue
        vrefs = {(int(r[f"videos/{key}/chunk_index"]), int(r[f"videos/{key}/file_index"])) for r in rows}
        for path in sorted((root / "videos" / key).glob("chunk-*/file-*.mp4")):
            if chunk_file_of(path) not in vrefs:
                path.unlink()
                report.append(f"{path.relative_to(root)}: video of an uncommitted episode, deleted")
    staging = root / "images"
    if staging.exists():
        n = sum(1 for p in staging.rglob("*") if p.is_file())
        shutil.rmtree(staging)
        if n:
            report.append(f"images/: {n} staging frame(s) of an unfinished episode, deleted")
    for tmp in list(root.glob("tmp*")) + list(root.glob(".vla_repair_*")):
        if tmp.is_dir():
            shutil.rmtree(tmp)
            report.append(f"{tmp.name}/: leftover temp dir, deleted")


def _rebuild_tasks(rows: list[dict[str, Any]]) -> pd.DataFrame | None:
    """Task table in lerobot's assignment order (first appearance, episode by episode)."""
    order: list[str] = []
    for r in rows:
        for t in r["tasks"]:
            if t not in order:
                order.append(t)
    if not order:
        return None
    return pd.DataFrame({"task_index": range(len(order))}, index=pd.Index(order, name="task"))


def _episode_stats(row: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    stats: dict[str, dict[str, np.ndarray]] = {}
    for col, value in row.items():
        if col.startswith("stats/") and value is not None:
            feature, stat = col[len("stats/") :].rsplit("/", 1)
            stats.setdefault(feature, {})[stat] = np.asarray(value)
    return stats


def repair_dataset(root: str | Path) -> list[str]:
    """Makes lerobot's files agree with the sidecar's committed episodes.

    Args:
        root: Dataset root written by :class:`vla.data.writer.EpisodeWriter`.

    Returns:
        One human-readable line per thing dropped or rewritten (empty when the dataset was clean).

    Raises:
        DatasetError: The dataset is damaged in a way a crash cannot explain (e.g. a committed episode
            is missing from lerobot's metadata); nothing is deleted in that case.
    """
    root = Path(root)
    report: list[str] = []
    records, valid_bytes, torn = read_sidecar_raw(root)
    indices = [int(r["episode_index"]) for r in records]
    if indices != list(range(len(records))):
        raise DatasetError(f"{root / 'meta/vla_episodes.jsonl'}: episode indices {indices} are not 0..N-1")
    k = len(records)

    info = _load_info_or_backup(root, report)
    info_torn = bool(report)
    rows = _filter_episode_meta(root, k, report)
    _drop_unreferenced_files(root, rows, info, report)
    if torn:
        truncate_sidecar(root, valid_bytes)
        report.append("meta/vla_episodes.jsonl: torn trailing line removed")

    total_frames = sum(int(r["length"]) for r in rows)
    tasks = _rebuild_tasks(rows)
    try:
        on_disk_tasks = load_tasks(root) if (root / DEFAULT_TASKS_PATH).exists() else None
    except (OSError, ValueError, pa.ArrowInvalid):
        on_disk_tasks = pd.DataFrame()
    tasks_ok = (tasks is None and on_disk_tasks is None) or (
        tasks is not None and on_disk_tasks is not None and tasks.equals(on_disk_tasks)
    )
    if not tasks_ok:
        if tasks is None:
            (root / DEFAULT_TASKS_PATH).unlink(missing_ok=True)
        else:
            _write_lerobot_file(root, DEFAULT_TASKS_PATH, write_tasks, tasks)
        report.append(f"{DEFAULT_TASKS_PATH}: rebuilt from the committed episodes")

    try:
        stats_ok = load_stats(root) is not None or k == 0
    except (OSError, ValueError):
        stats_ok = False
    counts_ok = info.total_episodes == k and info.total_frames == total_frames
    if not counts_ok or info_torn or not stats_ok:
        rows_with_stats = _committed_rows_with_stats(root, k)
        if k > 0:
            stats = aggregate_stats([_episode_stats(r) for r in rows_with_stats])
            _write_lerobot_file(root, STATS_PATH, write_stats, stats)
        else:
            (root / STATS_PATH).unlink(missing_ok=True)
        report.append(f"{STATS_PATH}: recomputed from {k} committed episode(s)")
    if not counts_ok or info_torn:
        report.append(
            f"{INFO_PATH}: totals {info.total_episodes} episodes/{info.total_frames} frames -> "
            f"{k}/{total_frames}"
        )
        info.total_episodes = k
        info.total_frames = total_frames
        info.total_tasks = 0 if tasks is None else len(tasks)
        info.splits = {"train": f"0:{k}"} if k else {}
        _write_lerobot_file(root, INFO_PATH, write_info, info)
    if report:
        backup_info(root)
        for line in report:
            logger.warning("repair %s: %s", root, line)
    return report


def _committed_rows_with_stats(root: Path, k: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in episode_meta_files(root):
        rows.extend(r for r in pq.read_table(path).to_pylist() if int(r["episode_index"]) < k)
    rows.sort(key=lambda r: int(r["episode_index"]))
    return rows
