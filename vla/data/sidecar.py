"""The episode sidecar ``meta/vla_episodes.jsonl``: one line per committed episode.

A line is appended (and fsynced) only after lerobot has fully written and closed the episode's files,
so the sidecar is the commit log: an episode exists for our code if and only if its line does. A line
torn by a crash (no trailing newline, or not valid JSON) is an uncommitted episode.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from vla.data.schema import SIDECAR_FILE, SPEC_FILE, EpisodeMeta


def is_vla_dataset(root: str | Path) -> bool:
    """True for a dataset written by our writer (``meta/vla_spec.json`` or the sidecar exists): every
    column and the sidecar are then required. False: a plain LeRobot dataset, read with the defaults of
    :func:`vla.data.reader.read_episode_info` (and never written to)."""
    return (Path(root) / SPEC_FILE).exists() or sidecar_path(root).exists()


def sidecar_path(root: str | Path) -> Path:
    """Path of the sidecar file inside a dataset root."""
    return Path(root) / SIDECAR_FILE


def read_sidecar_raw(root: str | Path) -> tuple[list[dict[str, Any]], int, bool]:
    """Reads the complete sidecar lines.

    Args:
        root: Dataset root.

    Returns:
        ``(records, valid_bytes, torn)``: the parsed complete lines, the byte length of that valid
        prefix, and whether a trailing torn line followed it.
    """
    path = sidecar_path(root)
    if not path.exists():
        return [], 0, False
    data = path.read_bytes()
    records: list[dict[str, Any]] = []
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            return records, pos, True
        try:
            records.append(json.loads(data[pos:end]))
        except json.JSONDecodeError:
            return records, pos, True
        pos = end + 1
    return records, pos, False


def read_sidecar(root: str | Path) -> list[EpisodeMeta]:
    """Reads the committed episode records (a torn trailing line is ignored)."""
    return [EpisodeMeta.from_dict(r) for r in read_sidecar_raw(root)[0]]


def truncate_sidecar(root: str | Path, valid_bytes: int) -> None:
    """Cuts a torn trailing line off the sidecar."""
    path = sidecar_path(root)
    with open(path, "r+b") as f:
        f.truncate(valid_bytes)
        f.flush()
        os.fsync(f.fileno())


def append_sidecar(root: str | Path, meta: EpisodeMeta) -> None:
    """Appends one record with a single write, then fsyncs: the episode's commit point."""
    line = (meta.to_json() + "\n").encode()
    path = sidecar_path(root)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
