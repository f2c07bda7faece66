"""The cheap checks every entry point runs on its inputs before any work: a dataset folder, a checkpoint.

Both read and never write. A failure raises :class:`~vla.errors.InputError` (for datasets its subclass
:class:`~vla.data.errors.DatasetError`) with one line naming the file, the episode or field, and what to
do; ``vla.errors.exit_on_refusal`` turns that into ``error: ...`` and exit status 2 in the CLIs.

- :func:`check_dataset`: info.json, the stored spec, lerobot's episode table, the sidecar, every data file's
  declared columns, rows per episode, finite state/action/policy_action/reward, state and action within the
  robot profile's joint ranges or the outlier rule (:mod:`vla.data.ranges`), the files rows point at, and
  each episode's first and last frame of every camera video decoding (:mod:`vla.data.videos`). Reads the
  metadata and the few numeric columns (no images): about a second for 200 episodes, plus ~5 ms per video
  file. The full validator (image shapes, every column's shape) stays a command:
  ``python -m vla.data.validate``.
- :func:`check_checkpoint`: ``config.yaml`` names a registered policy and only that policy's fields;
  ``model.safetensors`` (and ``stats.safetensors``) are real safetensors files, read header-first (no
  pickle, ever); the tensors' names and shapes fit the model the config builds (the policy's own ``load``,
  its errors reported as one line).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from vla.data.errors import DatasetError
from vla.data.layout import chunk_file_of, data_files, fixed_list_to_numpy
from vla.data.ranges import ValueCheck
from vla.data.schema import ACTION, STATE
from vla.data.sidecar import is_vla_dataset, read_sidecar_raw
from vla.data.validate import (
    FINITE_KEYS,
    ValidationReport,
    _check_columns,
    _check_episode_indices,
    _check_every_episode_has_frames,
    _check_features,
    _check_finite,
    _check_frames,
    _check_referenced_files,
    _check_sidecar,
    _episode_rows,
    _load_info,
    _load_spec,
)
from vla.data.videos import check_videos
from vla.errors import InputError

__all__ = ["CheckpointSummary", "check_checkpoint", "check_dataset", "read_safetensors_header"]

INFO_FILE = "meta/info.json"
INFO_BACKUP_FILE = "meta/vla_info_backup.json"  # vla.data.recovery keeps it (importing that costs ~3 s)
MODEL_FILE = "model.safetensors"  # vla.checkpoint's names (it imports torch; the dataset checks do not)
CONFIG_FILE = "config.yaml"
STATS_FILE = "stats.safetensors"


# ---- datasets --------------------------------------------------------------------------------------------
def check_dataset(
    root: str | Path,
    *,
    resuming: bool = False,
    profiles: Any = None,
    state_key: str = STATE,
    action_key: str = ACTION,
) -> ValidationReport:
    """The cheap checks of a LeRobotDataset v3 folder written by :class:`vla.data.writer.EpisodeWriter`, or
    of a plain one written by lerobot (no ``meta/vla_spec.json``, no sidecar): then only ``state_key`` and
    ``action_key`` are required and the sidecar check is skipped; every other check runs.

    Args:
        root: Dataset root.
        resuming: The dataset is about to be appended to by a writer, which first repairs what an
            interrupted run left (a torn sidecar line, files of an uncommitted episode, totals counting
            it): check only the committed episodes.
        profiles: Robot profiles for info.json's ``robot_type``: a registry, or the name of a module holding
            one as ``PROFILES`` (e.g. ``"hardware.profiles"``); None: no profile, the outlier rule only.
        state_key: The feature read as ``observation.state`` (``data.keys.state`` of ``vla-train``).
        action_key: The feature read as ``action`` (``data.keys.action``).

    Returns:
        A :class:`~vla.data.validate.ValidationReport` (episodes, frames, features).

    Raises:
        DatasetError: The first problem, in one line: the file, the episode or field, what to do.
    """
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"{root}: no such dataset folder; pass a LeRobotDataset folder (with {INFO_FILE})")
    fix = (
        "the dataset is refused and left as it is: repair or re-create it "
        f"(full report: python -m vla.data.validate {root})"
    )
    try:
        return _check_dataset(root, resuming, profiles, (state_key, action_key))
    except DatasetError as exc:
        raise DatasetError(f"{exc}; {fix}") from exc
    except (OSError, ValueError, TypeError, KeyError, IndexError, pa.ArrowException) as exc:  # unforeseen
        raise DatasetError(f"{root}: unexpected content ({type(exc).__name__}: {exc}); {fix}") from exc


def _check_dataset(root: Path, resuming: bool, profiles: Any, keys: tuple[str, str]) -> ValidationReport:
    info_path = root / INFO_FILE
    try:
        info, features = _load_info(info_path)
    except DatasetError:
        if not (resuming and (root / INFO_BACKUP_FILE).exists()):
            raise
        info, features = _load_info(root / INFO_BACKUP_FILE)  # a torn info.json: the writer restores it
    spec = _load_spec(root)
    ours = spec is not None or is_vla_dataset(root)
    _check_features(info_path, features, spec, ours=ours, state_key=keys[0], action_key=keys[1])
    rows = _episode_rows(root, skip_unreadable=resuming)
    if resuming:  # only what the sidecar committed; the writer drops the rest before appending
        records = read_sidecar_raw(root)[0]
        committed = {int(r["episode_index"]) for r in records if "episode_index" in r}
        rows = [r for r in rows if int(r["episode_index"]) in committed]
    _check_episode_indices(root, rows, None if resuming else int(info.get("total_episodes", -1)))
    _check_sidecar(root, rows, torn_ok=resuming)
    rows_by_ep = {int(r["episode_index"]): r for r in rows}
    _check_referenced_files(root, info, features, rows_by_ep)
    referenced = {(int(r["data/chunk_index"]), int(r["data/file_index"])) for r in rows}
    seen: set[int] = set()
    num_frames = 0
    values = ValueCheck(features, info.get("robot_type"), profiles, checked=keys)
    for path in data_files(root):
        if chunk_file_of(path) in referenced:
            num_frames += _check_data_columns(path, features, int(info["fps"]), rows_by_ep, seen, values)
        elif not resuming:
            raise DatasetError(f"{path}: data file not referenced by any episode")
    _check_every_episode_has_frames(root, info, rows_by_ep, seen)
    if not resuming and num_frames != int(info.get("total_frames", -1)):
        raise DatasetError(
            f"{info_path}: total_frames={info.get('total_frames')} but data holds {num_frames}"
        )
    tasks = root / "meta/tasks.parquet"
    if tasks.exists() and not resuming:  # (an interrupted writer may have torn it; it is rebuilt)
        _parquet_file(tasks, "task table").close()
    values.check()
    check_videos(root, info, features, rows_by_ep)
    return ValidationReport(root, len(rows), num_frames, sorted(features), values.notes)


def _parquet_file(path: Path, what: str) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as e:
        raise DatasetError(f"{path}: unreadable {what} ({e})") from e


def _check_data_columns(
    path: Path,
    features: dict[str, Any],
    fps: int,
    rows_by_ep: dict[int, dict[str, Any]],
    seen: set[int],
    values: ValueCheck,
) -> int:
    """One data file: its footer (schema), then only the index and the finite-checked columns (state and
    action of the episodes in ``rows_by_ep`` go to ``values``)."""
    pf = _parquet_file(path, "data file")
    try:
        _check_columns(path, pf.schema_arrow.names, features)
        finite = [k for k in dict.fromkeys((*FINITE_KEYS, *values.checked)) if k in features]
        try:
            table = pf.read(columns=["episode_index", "frame_index", "timestamp", *finite])
        except (OSError, pa.ArrowException) as e:
            raise DatasetError(f"{path}: unreadable data file ({e})") from e
    finally:
        pf.close()
    ep_col = table.column("episode_index").to_numpy()
    frame_idx = table.column("frame_index").to_numpy()
    committed = np.isin(ep_col, list(rows_by_ep))
    for key in finite:
        width = math.prod(features[key].get("shape", [1]))
        column = fixed_list_to_numpy(table.column(key), width)
        if column.ndim != 2 or column.shape[1] != width or column.dtype.kind not in "biuf":
            raise DatasetError(
                f"{path}: field '{key}' is not a numeric column of width {width} (info.json declares "
                f"{features[key].get('shape')})"
            )
        _check_finite(path, key, column, ep_col, frame_idx)
        if key in values.checked:
            values.add(path, key, column[committed], ep_col[committed], frame_idx[committed])
    timestamps = table.column("timestamp").to_numpy()
    _check_frames(path, ep_col, frame_idx, timestamps, fps, rows_by_ep, seen)
    return len(table)


# ---- checkpoints -----------------------------------------------------------------------------------------
@dataclass
class CheckpointSummary:
    """A checkpoint that passed :func:`check_checkpoint`.

    Attributes:
        path: The checkpoint folder.
        type: The registered policy type its config names.
        tensors: ``model.safetensors``'s tensors: name -> (dtype, shape).
    """

    path: Path
    type: str
    tensors: dict[str, tuple[str, list[int]]]


_DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
    "U16": 2, "I16": 2, "F16": 2, "BF16": 2,
    "U32": 4, "I32": 4, "F32": 4,
    "U64": 8, "I64": 8, "F64": 8,
}  # fmt: skip
_MAX_HEADER = 100_000_000  # the safetensors format's own limit
_NOT_OURS = "not a safetensors file: checkpoints hold tensors as safetensors only (no pickle)"


def read_safetensors_header(path: str | Path) -> dict[str, tuple[str, list[int]]]:
    """Reads and checks a safetensors file's header without loading a tensor (and without unpickling).

    Checks: the 8-byte header length fits the file, the header is JSON naming each tensor's dtype, shape
    and byte range, the ranges match the shapes, and the file holds exactly the bytes the header promises
    (a truncated or padded file is refused).

    Returns:
        ``{tensor name: (dtype, shape)}``.

    Raises:
        InputError: Missing, not safetensors (e.g. a pickle), or truncated; the message names the file.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(
            f"{path}: missing; the checkpoint folder is incomplete (use the folder training wrote)"
        )
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if n < 2 or n > min(size - 8, _MAX_HEADER):
            kind = " (it looks like a pickle)" if head[:1] == b"\x80" or head[:2] == b"PK" else ""
            raise InputError(
                f"{path}: {_NOT_OURS}; header length {n} does not fit the {size}-byte file{kind}"
            )
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InputError(f"{path}: {_NOT_OURS}; its header is not JSON ({e})") from e
    if not isinstance(header, dict):
        raise InputError(f"{path}: {_NOT_OURS}; its header is not a JSON object")
    tensors: dict[str, tuple[str, list[int]]] = {}
    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, stop) = entry["dtype"], list(entry["shape"]), entry["data_offsets"]
            nbytes = _DTYPE_BYTES[dtype] * math.prod(int(d) for d in shape)
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{path}: tensor '{name}': malformed header entry ({e!r}); {_NOT_OURS}") from e
        if not 0 <= begin <= stop or stop - begin != nbytes:
            raise InputError(
                f"{path}: tensor '{name}': {stop - begin} bytes for a {dtype} of shape {shape}; the file is "
                "damaged: use another copy of the checkpoint"
            )
        tensors[name] = (dtype, shape)
        end = max(end, stop)
    if 8 + n + end != size:
        raise InputError(
            f"{path}: {size} bytes but its header describes {8 + n + end}: truncated or damaged; "
            "use another copy of the checkpoint"
        )
    return tensors


def check_checkpoint(path: str | Path, *, imports: Sequence[str] = ()) -> CheckpointSummary:
    """The checks of a policy checkpoint folder, before a tool uses it.

    Args:
        path: The folder (``config.yaml``, ``model.safetensors``, optional ``stats.safetensors``).
        imports: Modules that register policies in ``vla.policy.POLICIES`` (e.g. ``["policies"]``),
            imported first.

    Returns:
        A :class:`CheckpointSummary`.

    Raises:
        InputError: The first problem, in one line: the file, the field or tensor, what to do.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise InputError(
            f"{folder}: checkpoint folder not found; pass a folder holding {CONFIG_FILE} and {MODEL_FILE} "
            "(e.g. <train out>/checkpoints/last)"
        )
    config = _read_config(folder / CONFIG_FILE)
    tensors = read_safetensors_header(folder / MODEL_FILE)
    if (folder / STATS_FILE).exists():
        read_safetensors_header(folder / STATS_FILE)
    cls = _policy_class(folder / CONFIG_FILE, config["type"], imports)
    _check_fields(folder / CONFIG_FILE, config, cls)
    _check_loads(folder, cls, tensors)
    _check_finite_weights(folder / MODEL_FILE)
    return CheckpointSummary(folder, str(config["type"]), tensors)


def _check_finite_weights(path: Path) -> None:
    """No NaN/inf in the weights (what a diverged run used to save)."""
    import torch
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        for name in f.keys():  # noqa: SIM118  (safe_open has keys(), no __iter__)
            t = f.get_tensor(name)
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                raise InputError(
                    f"{path}: tensor '{name}' holds NaN/inf; the weights are broken (a diverged run?): "
                    "use an earlier checkpoint"
                )


def _read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise InputError(f"{path}: missing; not a checkpoint folder (use the folder training wrote)")
    try:
        config = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not valid YAML ({e}); restore the file training wrote") from e
    if not isinstance(config, dict) or not isinstance(config.get("type"), str):
        raise InputError(f"{path}: field 'type' naming the policy is missing; not a policy checkpoint")
    return config


def _policy_class(config_path: Path, name: str, imports: Sequence[str]) -> Any:
    from vla.policy import POLICIES, import_policy_modules

    import_policy_modules(imports)
    try:
        return POLICIES.get(name)
    except KeyError:
        raise InputError(
            f"{config_path}: field 'type' = {name!r} is not a registered policy (registered: "
            f"{', '.join(POLICIES.names()) or 'none'}); import the module that registers it"
        ) from None
    except ImportError as e:  # a lazily registered policy whose code cannot be imported here
        raise InputError(f"{config_path}: policy {name!r} cannot be imported ({e})") from e


def _known_fields(cls: Any) -> set[str] | None:
    """The config fields a policy class accepts: its ``config_class``'s, else its constructor's."""
    config_class = getattr(cls, "config_class", None)
    if config_class is not None and dataclasses.is_dataclass(config_class):
        return {f.name for f in dataclasses.fields(config_class)} | {"type"}
    params = inspect.signature(cls.__init__).parameters.values()
    if any(p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in params):
        return None
    return {p.name for p in params if p.name != "self"} | {"type"}


def _check_fields(config_path: Path, config: dict[str, Any], cls: Any) -> None:
    known = _known_fields(cls)
    if known is None:
        return
    for name in config:
        if name not in known:
            close = difflib.get_close_matches(str(name), sorted(known), n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise InputError(
                f"{config_path}: field '{name}' is not a field of policy '{config['type']}' "
                f"({getattr(cls, 'config_class', cls).__name__}); {hint}remove or rename it"
            )


_SIZE = re.compile(
    r"size mismatch for ([^:\s]+): copying a param with shape torch\.Size\(\[([^\]]*)\]\) from checkpoint, "
    r"the shape in current model is torch\.Size\(\[([^\]]*)\]\)"
)
_KEYS = re.compile(r"(Missing|Unexpected) key\(s\) in state_dict: \"([^\"]+)\"")


def _check_loads(folder: Path, cls: Any, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """Builds the policy the config describes and loads the weights into it (the class's own ``load``)."""
    try:
        cls.load(folder, device="cpu")
    except InputError:
        raise
    except RuntimeError as e:
        text = str(e)
        size, keys = _SIZE.search(text), _KEYS.search(text)
        model = folder / MODEL_FILE
        if size:
            raise InputError(
                f"{model}: tensor '{size.group(1)}' has shape [{size.group(2)}] but the model built from "
                f"{CONFIG_FILE} needs [{size.group(3)}]; the weights do not fit this config (use the folder "
                "training wrote, unedited)"
            ) from e
        if keys:
            what = (
                f"of the model built from {CONFIG_FILE} is missing from the file"
                if keys.group(1) == "Missing"
                else f"is not part of the model built from {CONFIG_FILE}"
            )
            raise InputError(
                f"{model}: tensor '{keys.group(2)}' {what} ({len(tensors)} tensors in the file); the weights "
                "do not fit this config (use the folder training wrote, unedited)"
            ) from e
        raise InputError(f"{folder}: the policy cannot be loaded ({_first_line(e)})") from e
    except FileNotFoundError as e:
        named = re.search(r"No such file or directory:? '?([^'\s]+)", str(e))
        missing = e.filename or (named.group(1) if named else folder)
        raise InputError(
            f"{missing}: missing; the checkpoint folder is incomplete (use the folder training wrote)"
        ) from e
    except Exception as e:  # any other failure to build the policy from its own config
        where = folder / CONFIG_FILE if isinstance(e, (TypeError, ValueError, KeyError)) else folder
        text = _first_line(e)
        prefix = "" if str(folder) in text else f"{where}: "
        raise InputError(
            f"{prefix}{text}; policy '{cls.__name__}' cannot be built from this checkpoint "
            f"({type(e).__name__}): fix {CONFIG_FILE} or use the folder training wrote"
        ) from e


def _first_line(exc: BaseException) -> str:
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
