"""Dataset validation: every check that training and replay rely on, with precise messages.

Usage: ``python -m vla.data.validate <dataset_dir>`` prints ``OK ...`` or the error and exits 1. The command
holds state and action to the robot profiles of ``hardware.profiles`` (:mod:`vla.data.ranges`).
"""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from vla.data.errors import DatasetError
from vla.data.layout import (
    chunk_file_of,
    data_file_path,
    data_files,
    episode_meta_files,
    fixed_list_to_numpy,
)
from vla.data.ranges import PROFILES_MODULE, ValueCheck
from vla.data.schema import (
    ACTION,
    DONE,
    IMAGE_PREFIX,
    IS_INTERVENTION,
    POLICY_ACTION,
    REWARD,
    SIDECAR_FILE,
    SOURCES,
    SPEC_FILE,
    STATE,
    EpisodeSpec,
)
from vla.data.sidecar import is_vla_dataset, read_sidecar_raw
from vla.data.videos import check_videos, video_path

FINITE_KEYS = (STATE, ACTION, POLICY_ACTION, REWARD)
REQUIRED_KEYS = (STATE, ACTION, POLICY_ACTION, IS_INTERVENTION, REWARD, DONE)
LEROBOT_KEYS = ("timestamp", "frame_index", "episode_index", "index", "task_index")

__all__ = ["DatasetError", "ValidationReport", "validate_dataset"]


@dataclass
class ValidationReport:
    """Summary of a dataset that passed validation.

    Attributes:
        root: Dataset root.
        num_episodes: Committed episodes.
        num_frames: Total frames.
        features: Feature keys declared in info.json.
        warnings: Non-fatal observations.
    """

    root: Path
    num_episodes: int
    num_frames: int
    features: list[str]
    warnings: list[str] = field(default_factory=list)


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as e:
        raise DatasetError(f"{path}: missing") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: not valid JSON ({e})") from e


def _load_info(info_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``meta/info.json`` and its ``features``, with the fields the readers rely on present."""
    info = _load_json(info_path)
    if not isinstance(info, dict) or not isinstance(info.get("features"), dict):
        raise DatasetError(f"{info_path}: field 'features' missing or not an object")
    for key in ("fps", "data_path"):
        if key not in info:
            raise DatasetError(f"{info_path}: field '{key}' missing")
    bad = sorted(k for k, ft in info["features"].items() if not isinstance(ft, dict) or "dtype" not in ft)
    if bad:
        raise DatasetError(f"{info_path}: feature '{bad[0]}' has no 'dtype'")
    return info, info["features"]


def _load_spec(root: Path) -> EpisodeSpec | None:
    """The schema stored with the dataset (``meta/vla_spec.json``), if any."""
    path = root / SPEC_FILE
    if not path.exists():
        return None
    try:
        return EpisodeSpec.from_json(path.read_text())
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise DatasetError(f"{path}: not a valid episode spec ({type(e).__name__}: {e})") from e


def _check_features(
    info_path: Path,
    features: dict[str, Any],
    spec: EpisodeSpec | None,
    *,
    ours: bool = True,
    state_key: str = STATE,
    action_key: str = ACTION,
) -> None:
    """Our dataset (``ours``): every feature of the spec, or of :data:`REQUIRED_KEYS` and a camera. A plain
    LeRobot dataset: only the state and action features (their mapped names), 1-D."""
    expected: dict[str, Any]
    if not ours:
        _check_plain_features(info_path, features, state_key, action_key)
        return
    if spec is not None:
        expected = json.loads(json.dumps(spec.features()))
    else:
        expected = {k: None for k in REQUIRED_KEYS}
        if not any(k.startswith(IMAGE_PREFIX) for k in features):
            raise DatasetError(f"{info_path}: no '{IMAGE_PREFIX}<cam>' feature declared")
    for key in (*expected, *LEROBOT_KEYS, state_key, action_key):
        if key not in features:
            raise DatasetError(f"{info_path}: feature '{key}' missing from info.json features")
    for key, want in expected.items():
        got = features[key]
        if want is None:
            continue
        if list(got.get("shape", [])) != list(want["shape"]):
            raise DatasetError(
                f"{info_path}: feature '{key}' declared shape {got.get('shape')}, spec says {want['shape']}"
            )
        if got.get("dtype") != want["dtype"]:
            raise DatasetError(
                f"{info_path}: feature '{key}' declared dtype {got.get('dtype')}, spec says {want['dtype']}"
            )
    for key in REQUIRED_KEYS:
        if key in (STATE, ACTION, POLICY_ACTION) and len(features[key]["shape"]) != 1:
            raise DatasetError(f"{info_path}: feature '{key}' must be 1-D, declared {features[key]['shape']}")
    if features[ACTION]["shape"] != features[POLICY_ACTION]["shape"]:
        raise DatasetError(
            f"{info_path}: feature '{POLICY_ACTION}' shape {features[POLICY_ACTION]['shape']} "
            f"!= '{ACTION}' shape {features[ACTION]['shape']}"
        )


def _check_plain_features(info_path: Path, features: dict[str, Any], state_key: str, action_key: str) -> None:
    for key in (state_key, action_key, *LEROBOT_KEYS):
        if key not in features:
            hint = "" if key in LEROBOT_KEYS else " (name another feature with data.keys.state / .action)"
            raise DatasetError(f"{info_path}: feature '{key}' missing from info.json features{hint}")
    for key in (state_key, action_key):
        shape = features[key].get("shape", [])
        if len(shape) != 1:
            raise DatasetError(f"{info_path}: feature '{key}' must be 1-D, declared {shape}")
    if POLICY_ACTION in features and features[POLICY_ACTION].get("shape") != features[action_key]["shape"]:
        raise DatasetError(
            f"{info_path}: feature '{POLICY_ACTION}' shape {features[POLICY_ACTION].get('shape')} "
            f"!= '{action_key}' shape {features[action_key]['shape']}"
        )


def _episode_rows(root: Path, *, skip_unreadable: bool = False) -> list[dict[str, Any]]:
    """lerobot's episode table without its (large) ``stats/`` columns; ``skip_unreadable``: leave out a file
    an interrupted writer never closed (its episode is uncommitted) instead of refusing it."""
    rows: list[dict[str, Any]] = []
    for path in episode_meta_files(root):
        try:  # one footer parse per file (the stats columns make it the costly part)
            with pq.ParquetFile(path) as pf:
                table = pf.read(columns=[c for c in pf.schema_arrow.names if not c.startswith("stats/")])
        except (OSError, pa.ArrowException) as e:
            if skip_unreadable:
                continue
            raise DatasetError(f"{path}: unreadable episode metadata ({e})") from e
        rows.extend(table.to_pylist())
    for row in rows:
        for fld in ("episode_index", "length", "data/chunk_index", "data/file_index"):
            if row.get(fld) is None:
                raise DatasetError(f"{root / 'meta/episodes'}: an episode row has no field '{fld}'")
    rows.sort(key=lambda r: int(r["episode_index"]))
    return rows


def _check_episode_indices(root: Path, rows: list[dict[str, Any]], total: int | None) -> None:
    where = root / "meta/episodes"
    indices = [int(r["episode_index"]) for r in rows]
    if len(set(indices)) != len(indices):
        dup = sorted({i for i in indices if indices.count(i) > 1})
        raise DatasetError(f"{where}: episode(s) {dup} listed more than once")
    missing = sorted(set(range(max(indices, default=-1) + 1)) - set(indices))
    if missing:
        raise DatasetError(f"{where}: episode index gap: episode(s) {missing} missing (found {indices})")
    if total is not None and len(indices) != total:
        raise DatasetError(
            f"{root / 'meta/info.json'}: total_episodes={total} but {len(indices)} episodes found"
        )


def _check_sidecar(root: Path, rows: list[dict[str, Any]], *, torn_ok: bool = False) -> None:
    if not is_vla_dataset(root):  # a plain LeRobot dataset: lerobot's episode table is the only record
        return
    path = root / SIDECAR_FILE
    if not path.exists():
        raise DatasetError(f"{path}: missing (episode metadata sidecar)")
    records, _, torn = read_sidecar_raw(root)
    if torn and not torn_ok:
        raise DatasetError(f"{path}: torn trailing line after episode {len(records) - 1} (unrepaired crash?)")
    lengths = {int(r["episode_index"]): int(r["length"]) for r in rows}
    seen: set[int] = set()
    for line_no, rec in enumerate(records, 1):
        for fld in ("episode_index", "length", "success", "source"):
            if fld not in rec:
                raise DatasetError(f"{path}: line {line_no}: field '{fld}' missing")
        ep = int(rec["episode_index"])
        if ep in seen:
            raise DatasetError(f"{path}: episode {ep}: listed twice")
        seen.add(ep)
        if ep not in lengths:
            raise DatasetError(f"{path}: episode {ep}: in the sidecar but not in lerobot's episode metadata")
        if rec["source"] not in SOURCES:
            raise DatasetError(f"{path}: episode {ep}: field 'source' = {rec['source']!r} not in {SOURCES}")
        if not isinstance(rec["success"], bool):
            raise DatasetError(f"{path}: episode {ep}: field 'success' = {rec['success']!r} is not a bool")
        if not isinstance(rec.get("extra", {}), dict):
            raise DatasetError(f"{path}: episode {ep}: field 'extra' is not an object")
        if int(rec["length"]) != lengths[ep]:
            raise DatasetError(
                f"{path}: episode {ep}: field 'length' = {rec['length']} but lerobot says {lengths[ep]}"
            )
    extra = sorted(set(lengths) - seen)
    if extra:
        raise DatasetError(
            f"{path}: episode(s) {extra}: in lerobot's episode metadata but not in the sidecar"
        )


def _check_columns(path: Path, names: list[str], features: dict[str, Any]) -> None:
    """Every feature info.json declares (videos aside) is a column of the data file."""
    for key, ft in features.items():
        if ft.get("dtype") != "video" and key not in names:
            raise DatasetError(f"{path}: field '{key}' declared in info.json but absent from the data")


def _check_finite(
    path: Path, key: str, values: np.ndarray, ep_col: np.ndarray, frame_idx: np.ndarray
) -> None:
    """``values`` [N, D] of a :data:`FINITE_KEYS` column hold no NaN/inf."""
    finite = np.isfinite(values.astype(np.float64)).all(axis=1)
    if not finite.all():
        r = int(np.flatnonzero(~finite)[0])
        raise DatasetError(
            f"{path}: episode {int(ep_col[r])}: field '{key}' has NaN/inf at frame {int(frame_idx[r])}"
        )


def _check_frames(
    path: Path,
    ep_col: np.ndarray,
    frame_idx: np.ndarray,
    timestamps: np.ndarray,
    fps: int,
    rows_by_ep: dict[int, dict[str, Any]],
    seen: set[int],
) -> None:
    """Each episode in the file has exactly its metadata length of rows, frame_index 0..L-1 and timestamps
    frame_index / fps; the episodes found are added to ``seen``."""
    for ep in np.unique(ep_col):
        sel = ep_col == ep
        ep = int(ep)
        if ep not in rows_by_ep:
            raise DatasetError(f"{path}: episode {ep}: frames present but episode not in lerobot's metadata")
        seen.add(ep)
        length = int(rows_by_ep[ep]["length"])
        fi = frame_idx[sel]
        if len(fi) != length:
            raise DatasetError(f"{path}: episode {ep}: {len(fi)} frames but metadata length {length}")
        if not np.array_equal(np.sort(fi), np.arange(length)):
            raise DatasetError(f"{path}: episode {ep}: field 'frame_index' is not 0..{length - 1}")
        order = np.argsort(fi)
        if not np.allclose(timestamps[sel][order], np.arange(length) / fps, atol=1e-4):
            raise DatasetError(f"{path}: episode {ep}: field 'timestamp' is not frame_index / fps ({fps})")


def _check_every_episode_has_frames(
    root: Path, info: dict[str, Any], rows_by_ep: dict[int, dict[str, Any]], seen: set[int]
) -> None:
    """An episode of the metadata whose rows are all gone from its data file (the per-file check cannot
    see an episode that is absent)."""
    for ep in sorted(set(rows_by_ep) - seen):
        row = rows_by_ep[ep]
        if int(row["length"]) == 0:
            continue
        path = data_file_path(root, info["data_path"], row)
        raise DatasetError(f"{path}: episode {ep}: 0 frames but metadata length {int(row['length'])}")


def _check_referenced_files(
    root: Path, info: dict[str, Any], features: dict[str, Any], rows_by_ep: dict[int, dict[str, Any]]
) -> None:
    """Every data and video file an episode row points at exists."""
    missing: dict[Path, list[int]] = {}
    for ep, r in rows_by_ep.items():
        path = data_file_path(root, info["data_path"], r)
        if not path.exists():
            missing.setdefault(path, []).append(ep)
    for path, eps in sorted(missing.items()):
        raise DatasetError(f"{path}: missing data file of episode(s) {eps}")
    for key, ft in features.items():
        if ft.get("dtype") != "video":
            continue
        for ep, r in rows_by_ep.items():
            vpath = video_path(root, info, key, r)
            if not vpath.exists():
                raise DatasetError(f"{vpath}: episode {ep}: field '{key}': video file missing")


def _check_data_file(
    path: Path,
    features: dict[str, Any],
    fps: int,
    rows_by_ep: dict[int, dict[str, Any]],
    seen: set[int],
    values: ValueCheck,
) -> int:
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as e:
        raise DatasetError(f"{path}: unreadable data file ({e})") from e
    _check_columns(path, table.column_names, features)
    ep_col = table.column("episode_index").to_numpy()
    frame_idx = table.column("frame_index").to_numpy()
    for key, ft in features.items():
        if ft["dtype"] in ("video", "image", "string") or key in LEROBOT_KEYS:
            continue
        shape = tuple(ft["shape"])
        width = int(np.prod(shape))
        column = fixed_list_to_numpy(table.column(key), width)
        if column.shape[1:] != (width,):
            bad = int(ep_col[0]) if len(ep_col) else -1
            raise DatasetError(
                f"{path}: episode {bad}: field '{key}' has actual shape {column.shape[1:]}, declared {shape}"
            )
        if key in FINITE_KEYS or key in values.checked:
            _check_finite(path, key, column, ep_col, frame_idx)
        if key in values.checked:
            values.add(path, key, column, ep_col, frame_idx)
    for key, ft in features.items():
        if ft["dtype"] == "image" and len(table):
            first = table.column(key)[0].as_py()
            img = np.asarray(Image.open(io.BytesIO(first["bytes"])).convert("RGB"))
            if img.shape != tuple(ft["shape"]):
                raise DatasetError(
                    f"{path}: episode {int(ep_col[0])}: field '{key}' has actual shape {img.shape}, "
                    f"declared {tuple(ft['shape'])}"
                )
    timestamps = table.column("timestamp").to_numpy()
    _check_frames(path, ep_col, frame_idx, timestamps, fps, rows_by_ep, seen)
    return len(table)


def validate_dataset(
    root: str | Path,
    spec: EpisodeSpec | None = None,
    *,
    profiles: Any = None,
    state_key: str = STATE,
    action_key: str = ACTION,
) -> ValidationReport:
    """Checks a dataset written by :class:`vla.data.writer.EpisodeWriter`, or a plain LeRobot v3 dataset.

    A plain dataset (no ``meta/vla_spec.json``, no sidecar: :func:`vla.data.sidecar.is_vla_dataset`) needs
    only ``state_key`` and ``action_key`` (1-D); its sidecar check is skipped and every other check runs.

    Checks: info.json declares every feature of the spec (the stored ``meta/vla_spec.json`` if ``spec``
    is None) with the right dtype/shape; episode indices are 0..N-1 without gaps and agree with
    info.json, the data files and the sidecar; every sidecar record has a valid ``source`` and a bool
    ``success``; actual column shapes match; state/action/policy_action/reward are finite; every episode
    has exactly its metadata length of rows; frame_index/timestamp are consistent; referenced data and
    video files exist; state and action lie within the robot profile's joint ranges, or pass the outlier
    rule (:mod:`vla.data.ranges`); each episode's first and last frame of every camera video decodes
    (:mod:`vla.data.videos`). All but the image and column shape checks also run at every load:
    :func:`vla.checks.check_dataset`.

    Args:
        root: Dataset root.
        spec: Expected schema; defaults to the one stored with the dataset (if any).
        profiles: Robot profiles for info.json's ``robot_type``: a registry, or the name of a module holding
            one as ``PROFILES`` (e.g. ``"hardware.profiles"``); None: no profile, the outlier rule only.
        state_key: The feature read as ``observation.state`` (a key map, ``data.keys.state``).
        action_key: The feature read as ``action`` (``data.keys.action``).

    Returns:
        A :class:`ValidationReport`.

    Raises:
        DatasetError: The first problem found, naming the file, the episode and the field.
    """
    root = Path(root)
    info_path = root / "meta/info.json"
    info, features = _load_info(info_path)
    if spec is None:
        spec = _load_spec(root)
    ours = spec is not None or is_vla_dataset(root)
    _check_features(info_path, features, spec, ours=ours, state_key=state_key, action_key=action_key)
    rows = _episode_rows(root)
    _check_episode_indices(root, rows, int(info.get("total_episodes", -1)))
    _check_sidecar(root, rows)
    rows_by_ep = {int(r["episode_index"]): r for r in rows}
    referenced = {(int(r["data/chunk_index"]), int(r["data/file_index"])) for r in rows}
    num_frames = 0
    seen: set[int] = set()
    values = ValueCheck(features, info.get("robot_type"), profiles, checked=(state_key, action_key))
    for path in data_files(root):
        if chunk_file_of(path) not in referenced:
            raise DatasetError(f"{path}: data file not referenced by any episode")
        num_frames += _check_data_file(path, features, int(info["fps"]), rows_by_ep, seen, values)
    _check_referenced_files(root, info, features, rows_by_ep)
    _check_every_episode_has_frames(root, info, rows_by_ep, seen)
    if num_frames != int(info.get("total_frames", -1)):
        raise DatasetError(
            f"{info_path}: total_frames={info.get('total_frames')} but data holds {num_frames}"
        )
    values.check()
    check_videos(root, info, features, rows_by_ep)
    warnings = list(values.notes)
    if any(p.is_file() for p in (root / "images").rglob("*")):
        warnings.append("images/ staging directory present (an unfinished episode; resume repairs it)")
    return ValidationReport(root, len(rows), num_frames, sorted(features), warnings)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: ``python -m vla.data.validate <dir>``."""
    args = sys.argv[1:] if argv is None else argv
    usage = (
        "usage: python -m vla.data.validate <dataset_dir>\n"
        "  checks a LeRobotDataset v3 folder (schema, metadata, values, videos); prints OK or the first\n"
        "  problem with its file, episode, frame and field (exit 1)"
    )
    if args in (["-h"], ["--help"]):
        print(usage)
        return 0
    if len(args) != 1 or args[0].startswith("-"):
        print(usage, file=sys.stderr)
        return 2
    try:
        report = validate_dataset(args[0], profiles=PROFILES_MODULE)  # vla does not import hardware: by name
    except DatasetError as e:
        print(f"ERROR: {e}")
        return 1
    print(f"OK: {report.root}: {report.num_episodes} episodes, {report.num_frames} frames")
    for w in report.warnings:
        print(f"warning: {w}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
