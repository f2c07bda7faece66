"""Reading episodes back: the lerobot dataset, our episode metadata, and whole episodes as numpy."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from vla.data.errors import DatasetError
from vla.data.layout import data_file_path, fixed_list_to_numpy, read_episode_rows
from vla.data.schema import REWARD, SUCCESS, TASK, EpisodeMeta
from vla.data.sidecar import is_vla_dataset, read_sidecar

_INFO = "meta/info.json"


def _require_dataset(root: Path) -> None:
    if not (root / _INFO).exists():
        raise FileNotFoundError(f"{root} is not a LeRobot dataset (no {_INFO})")


def open_dataset(root: str | Path, *, repo_id: str | None = None, **kwargs: Any) -> Any:
    """Opens a local dataset with lerobot's ``LeRobotDataset`` (read mode, never touches the hub).

    Args:
        root: Dataset root.
        repo_id: Name only; defaults to ``local/<dirname>``.
        **kwargs: Passed to ``LeRobotDataset`` (e.g. ``episodes``, ``delta_timestamps``).

    Returns:
        The ``LeRobotDataset``.

    Raises:
        FileNotFoundError: ``root`` holds no dataset (lerobot would otherwise try to download it).
    """
    root = Path(root)
    _require_dataset(root)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    return LeRobotDataset(repo_id or f"local/{root.name}", root=root, **kwargs)


EpisodeInfo = EpisodeMeta
"""One committed episode as seen by our code (the sidecar record: index, length, success, source, task,
extra; for a plain LeRobot dataset, the defaults of :func:`read_episode_info`)."""


def feature_names(root: str | Path) -> list[str]:
    """The per-frame feature keys of a dataset (``meta/info.json``)."""
    root = Path(root)
    _require_dataset(root)
    return list(json.loads((root / _INFO).read_text())["features"])


def read_episode_info(root: str | Path) -> list[EpisodeInfo]:
    """One :class:`EpisodeInfo` per committed episode, in index order.

    Our datasets (:func:`vla.data.sidecar.is_vla_dataset`): the sidecar's records. A plain LeRobot dataset
    (no ``meta/vla_spec.json``, no sidecar): lerobot's episode table (index, length, the first of its
    ``tasks``), ``source="demo"``, ``extra={}``, and ``success``:

    - ``next.success`` column: any frame of the episode true;
    - else a ``next.reward`` column: the episode's largest reward > 0;
    - else None (unknown): methods that need outcomes refuse such a dataset.
    """
    if is_vla_dataset(root):
        return list(read_sidecar(root))
    root = Path(root)
    _require_dataset(root)
    info = json.loads((root / _INFO).read_text())
    rows = read_episode_rows(root)
    outcome = _episode_outcomes(root, info, rows)
    return [
        EpisodeMeta(
            episode_index=int(r["episode_index"]),
            length=int(r["length"]),
            success=outcome.get(int(r["episode_index"])),
            source="demo",
            task=str((r.get("tasks") or [""])[0]),
        )
        for r in rows
    ]


def _episode_outcomes(root: Path, info: dict[str, Any], rows: list[dict[str, Any]]) -> dict[int, bool]:
    """Per episode: any ``next.success``, else max ``next.reward`` > 0; {} when the dataset has neither."""
    features = info["features"]
    key = SUCCESS if SUCCESS in features else REWARD if REWARD in features else None
    if key is None:
        return {}
    out: dict[int, bool] = {}
    for path in sorted({data_file_path(root, info["data_path"], r) for r in rows}):
        table = pq.read_table(path, columns=["episode_index", key])
        episodes = table.column("episode_index").to_numpy()
        values = fixed_list_to_numpy(table.column(key), 1).reshape(-1).astype(np.float64)
        for ep in np.unique(episodes):
            v = values[episodes == ep]
            out[int(ep)] = bool(v.any()) if key == SUCCESS else bool(v.max() > 0)
    return out


def load_episode(root: str | Path, index: int, *, keys: list[str] | None = None) -> dict[str, np.ndarray]:
    """Loads every frame of one episode as stacked numpy arrays.

    Reads the episode's parquet rows directly (one filtered read, no per-item ``__getitem__``). To read many
    episodes use :func:`iter_episodes`, which reads the metadata once.

    Args:
        root: Dataset root.
        index: Episode index.
        keys: Features to load (default: all, plus ``task``). Skip cameras for a fast action replay.

    Returns:
        ``{key: array}``: images uint8 [T, H, W, 3], vectors [T, D], (1,)-features [T],
        lerobot's ``frame_index``/``timestamp``/``index`` [T], and ``task`` as a [T] str array.

    Raises:
        IndexError: No episode ``index``.
    """
    for _, episode in iter_episodes(root, [index], keys=keys):
        return episode
    raise AssertionError("unreachable")


def iter_episodes(
    root: str | Path, indices: list[int] | None = None, *, keys: list[str] | None = None
) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """Yields ``(episode_index, arrays)`` like :func:`load_episode` for ``indices`` (default: all), reading
    lerobot's metadata and task table once."""
    root = Path(root)
    _require_dataset(root)
    info = json.loads((root / _INFO).read_text())
    features: dict[str, dict[str, Any]] = info["features"]
    rows = {int(r["episode_index"]): r for r in read_episode_rows(root)}
    wanted = [*features, TASK] if keys is None else list(keys)
    unknown = [k for k in wanted if k not in features and k != TASK]
    if unknown:
        raise KeyError(f"load_episode: unknown keys {unknown}; available {sorted(features)}")
    tasks = _task_table(root) if TASK in wanted else {}
    files = _FileCache()  # a packed data file holds many episodes: read it once, not once per episode
    for index in sorted(rows) if indices is None else indices:
        if index not in rows:
            raise IndexError(f"{root}: no episode {index} (dataset has {info['total_episodes']})")
        yield index, _read_episode(root, info, features, rows[index], index, wanted, tasks, files)


class _FileCache:
    """The last data file read (its wanted columns, in frame order) and where each episode's rows start."""

    def __init__(self) -> None:
        self.key: tuple[Path, tuple[str, ...]] | None = None
        self.table: pa.Table | None = None
        self.spans: dict[int, tuple[int, int]] = {}

    def episode(self, path: Path, columns: list[str], index: int) -> pa.Table:
        if self.key != (path, tuple(columns)):
            table = pq.read_table(path, columns=columns).sort_by(
                [("episode_index", "ascending"), ("index", "ascending")]
            )
            ids = table.column("episode_index").to_numpy()
            starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
            ends = np.r_[starts[1:], len(ids)]
            self.key, self.table = (path, tuple(columns)), table
            self.spans = {int(ids[a]): (int(a), int(b - a)) for a, b in zip(starts, ends, strict=True)}
        assert self.table is not None
        start, count = self.spans.get(index, (0, 0))
        return self.table.slice(start, count)


def _read_episode(
    root: Path,
    info: dict[str, Any],
    features: dict[str, dict[str, Any]],
    row: dict[str, Any],
    index: int,
    wanted: list[str],
    tasks: dict[int, str],
    files: _FileCache | None = None,
) -> dict[str, np.ndarray]:
    columns = [k for k in wanted if k in features and features[k]["dtype"] != "video"]
    helpers = [c for c in ("index", "episode_index", "task_index") if c not in columns]
    path = data_file_path(root, info["data_path"], row)
    if files is not None:
        table = files.episode(path, columns + helpers, index)
    else:
        table = pq.read_table(
            path, columns=columns + helpers, filters=[("episode_index", "==", index)]
        ).sort_by("index")
    out: dict[str, np.ndarray] = {}
    for key in columns + helpers:
        ft = features[key]
        col = table.column(key)
        if ft["dtype"] == "image":
            out[key] = np.stack([_decode_png(v) for v in col.to_pylist()])
        elif tuple(ft["shape"]) != (1,):
            out[key] = fixed_list_to_numpy(col, int(np.prod(ft["shape"]))).reshape(-1, *ft["shape"])
        else:
            out[key] = col.to_numpy()
    if TASK in wanted:
        out[TASK] = np.array([tasks[int(i)] for i in out["task_index"]])
    for key in wanted:
        if key in features and features[key]["dtype"] == "video":
            out[key] = _decode_video(root, info, row, key, out.get("timestamp"))
    for key in helpers:
        out.pop(key)
    return out


def _decode_png(value: dict[str, Any]) -> np.ndarray:
    if value.get("bytes") is not None:
        return np.asarray(Image.open(io.BytesIO(value["bytes"])).convert("RGB"))
    return np.asarray(Image.open(value["path"]).convert("RGB"))


def _task_table(root: Path) -> dict[int, str]:
    tasks = pq.read_table(root / "meta/tasks.parquet").to_pandas()
    return {int(i): str(t) for t, i in zip(tasks.index, tasks["task_index"], strict=True)}


def _decode_video(
    root: Path, info: dict[str, Any], row: dict[str, Any], key: str, timestamps: np.ndarray | None
) -> np.ndarray:
    from lerobot.datasets.video_utils import decode_video_frames

    path = root / info["video_path"].format(
        video_key=key,
        chunk_index=int(row[f"videos/{key}/chunk_index"]),
        file_index=int(row[f"videos/{key}/file_index"]),
    )
    start = float(row[f"videos/{key}/from_timestamp"])
    if timestamps is None:
        timestamps = (
            pq.read_table(
                data_file_path(root, info["data_path"], row),
                columns=["timestamp", "index"],
                filters=[("episode_index", "==", int(row["episode_index"]))],
            )
            .sort_by("index")
            .column("timestamp")
            .to_numpy()
        )
    query = [start + float(t) for t in timestamps]
    try:
        frames = decode_video_frames(path, query, tolerance_s=1e-4, return_uint8=True)  # [T, C, H, W]
    except Exception as exc:  # the decoders raise RuntimeError, IndexError, av errors, FrameTimestampError
        # (the checks decode each episode's first and last frame; damage in between surfaces here)
        from vla.video import decode_error_line

        raise DatasetError(
            f"{path}: episode {int(row['episode_index'])}: field '{key}': video cannot be decoded "
            f"({decode_error_line(exc, path)}); re-encode the video or re-record the episode (or drop it)"
        ) from exc
    return frames.permute(0, 2, 3, 1).numpy()
