"""Episode data: schema, crash-safe LeRobotDataset writer, reader, validation and normalisation stats.

Names are imported lazily, so ``import vla.data`` (and ``python -m vla.data.validate``) stays cheap
until lerobot is actually needed.
"""

from __future__ import annotations

import importlib
import os
import warnings
from typing import TYPE_CHECKING, Any

# lerobot's save_episode prints a datasets "Map" progress bar per episode (image embedding), and its
# SuppressProgressBars re-enables bars on exit, so a one-off disable does not stick: the env variable does
# (datasets reads it at import), and the warning datasets gives each time lerobot re-enables is dropped.
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
warnings.filterwarnings("ignore", message="Cannot enable progress bars", category=UserWarning)

_EXPORTS: dict[str, str] = {
    "SOURCES": "schema",
    "EpisodeMeta": "schema",
    "EpisodeSpec": "schema",
    "DatasetError": "errors",
    "EpisodeWriter": "writer",
    "load_spec": "writer",
    "EpisodeInfo": "reader",
    "load_episode": "reader",
    "open_dataset": "reader",
    "read_episode_info": "reader",
    "repair_dataset": "recovery",
    "Normalizer": "stats",
    "compute_stats": "stats",
    "load_stats": "stats",
    "save_stats": "stats",
    "ValidationReport": "validate",
    "validate_dataset": "validate",
}

if TYPE_CHECKING:
    from vla.data.errors import DatasetError
    from vla.data.reader import EpisodeInfo, load_episode, open_dataset, read_episode_info
    from vla.data.recovery import repair_dataset
    from vla.data.schema import SOURCES, EpisodeMeta, EpisodeSpec
    from vla.data.stats import Normalizer, compute_stats, load_stats, save_stats
    from vla.data.validate import ValidationReport, validate_dataset
    from vla.data.writer import EpisodeWriter, load_spec


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'vla.data' has no attribute {name!r}")
    return getattr(importlib.import_module(f"vla.data.{_EXPORTS[name]}"), name)


__all__ = [
    "SOURCES",
    "DatasetError",
    "EpisodeInfo",
    "EpisodeMeta",
    "EpisodeSpec",
    "EpisodeWriter",
    "Normalizer",
    "ValidationReport",
    "compute_stats",
    "load_episode",
    "load_spec",
    "load_stats",
    "open_dataset",
    "read_episode_info",
    "repair_dataset",
    "save_stats",
    "validate_dataset",
]
