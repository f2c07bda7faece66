"""Normalisation statistics: compute them from a dataset, store them in safetensors, apply them in torch.

Stats are exact (computed over every frame, not sampled), which lerobot's ``meta/stats.json`` also
is for vectors; ours add q01/q99 and live in safetensors so a checkpoint never needs pickle or JSON
parsing of arrays.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from safetensors.numpy import load_file, save_file

from vla.data.layout import data_files, fixed_list_to_numpy
from vla.data.schema import ACTION, STATE

STAT_NAMES: tuple[str, ...] = ("mean", "std", "min", "max", "q01", "q99")
NormMode = Literal["mean_std", "min_max", "quantiles"]
# range modes: the two statistics mapped to -1 and +1
_RANGE: dict[str, tuple[str, str]] = {"min_max": ("min", "max"), "quantiles": ("q01", "q99")}


def _root_of(source: str | Path | Any) -> Path:
    if isinstance(source, str | Path):
        return Path(source)
    return Path(source.root)  # a LeRobotDataset


def compute_stats(
    source: str | Path | Any, keys: Iterable[str] = (STATE, ACTION)
) -> dict[str, dict[str, np.ndarray]]:
    """Computes mean, std, min, max, q01 and q99 per dimension over every frame.

    Args:
        source: Dataset root, or a ``LeRobotDataset`` (its ``root`` is read).
        keys: Numeric (non-image) features.

    Returns:
        ``{key: {stat: float32 array of the feature's shape}}``.

    Raises:
        KeyError: A key is not a numeric column of the dataset.
        ValueError: The dataset holds no frames.
    """
    root = _root_of(source)
    keys = list(keys)
    columns: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for path in data_files(root):
        schema = pq.read_schema(path)
        for key in keys:
            if key not in schema.names or pa.types.is_struct(schema.field(key).type):
                raise KeyError(f"compute_stats: '{key}' is not a numeric column; available {schema.names}")
        table = pq.read_table(path, columns=keys)
        for key in keys:
            columns[key].append(fixed_list_to_numpy(table.column(key), 1).astype(np.float64))
    for key, parts in columns.items():
        if not parts or sum(len(p) for p in parts) == 0:
            raise ValueError(f"compute_stats: no frames for '{key}' in {root}")
    return {key: array_stats(np.concatenate(parts)) for key, parts in columns.items()}


def array_stats(x: np.ndarray) -> dict[str, np.ndarray]:
    """mean, std, min, max, q01, q99 over the first axis of ``x`` [N, D] (float32 results)."""
    x = np.asarray(x, dtype=np.float64)
    q01, q99 = np.quantile(x, [0.01, 0.99], axis=0)
    stats = {"mean": x.mean(0), "std": x.std(0), "min": x.min(0), "max": x.max(0), "q01": q01, "q99": q99}
    return {k: v.astype(np.float32) for k, v in stats.items()}


def save_stats(path: str | Path, stats: dict[str, dict[str, np.ndarray]]) -> None:
    """Writes stats to safetensors with flat keys ``<feature>/<stat>`` (e.g. ``action/mean``)."""
    flat = {
        f"{k}/{s}": np.ascontiguousarray(v, dtype=np.float32) for k, d in stats.items() for s, v in d.items()
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_file(flat, str(path))


def load_stats(path: str | Path) -> dict[str, dict[str, np.ndarray]]:
    """Reads stats written by :func:`save_stats` (no pickle involved)."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for flat_key, value in load_file(str(path)).items():
        key, stat = flat_key.rsplit("/", 1)
        out.setdefault(key, {})[stat] = value
    return out


class Normalizer:
    """Normalises and unnormalises features with fixed statistics (torch, any device/dtype).

    Modes: ``"mean_std"``: (x - mean) / std; ``"min_max"``: maps [min, max] to [-1, 1]; ``"quantiles"``: maps
    [q01, q99] to [-1, 1] (LeRobot's QUANTILES, pi0.5's default). Denominators are clamped to ``eps`` so
    constant dimensions stay finite.
    """

    def __init__(
        self,
        stats: dict[str, dict[str, np.ndarray]],
        modes: dict[str, NormMode] | NormMode = "mean_std",
        eps: float = 1e-6,
    ) -> None:
        """Builds the normaliser.

        Args:
            stats: ``{key: {stat: array}}`` as from :func:`compute_stats` / :func:`load_stats`.
            modes: One mode for every key, or a mode per key.
            eps: Lower bound on std and on (max - min).

        Raises:
            ValueError: Unknown mode or a mode for a key without stats.
        """
        self.eps = eps
        self._stats = {
            k: {s: torch.as_tensor(np.asarray(v), dtype=torch.float32) for s, v in d.items()}
            for k, d in stats.items()
        }
        self.modes: dict[str, NormMode] = (
            dict.fromkeys(self._stats, modes) if isinstance(modes, str) else dict(modes)
        )
        for key, mode in self.modes.items():
            if mode != "mean_std" and mode not in _RANGE:
                raise ValueError(f"Normalizer: unknown mode {mode!r} for '{key}'")
            for stat in _RANGE.get(mode, ("mean", "std")):
                self._get(key, stat)

    @property
    def keys(self) -> list[str]:
        """Keys with statistics."""
        return sorted(self._stats)

    def _get(self, key: str, stat: str, like: torch.Tensor | None = None) -> torch.Tensor:
        if key not in self._stats:
            raise KeyError(f"Normalizer: no statistics for '{key}'; available keys: {self.keys}")
        if stat not in self._stats[key]:
            raise KeyError(f"Normalizer: no '{stat}' for '{key}'; available: {sorted(self._stats[key])}")
        t = self._stats[key][stat]
        return t if like is None else t.to(device=like.device, dtype=like.dtype)

    def _mode(self, key: str) -> NormMode:
        if key not in self.modes:
            raise KeyError(f"Normalizer: no statistics for '{key}'; available keys: {self.keys}")
        return self.modes[key]

    def _range(self, key: str, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        lo, hi = _RANGE[self._mode(key)]
        return self._get(key, lo, like), self._get(key, hi, like)

    def normalize(self, key: str, x: torch.Tensor) -> torch.Tensor:
        """Maps raw values of ``key`` (shape [..., D]) to normalised space."""
        if self._mode(key) == "mean_std":
            return (x - self._get(key, "mean", x)) / self._get(key, "std", x).clamp_min(self.eps)
        lo, hi = self._range(key, x)
        return 2.0 * (x - lo) / (hi - lo).clamp_min(self.eps) - 1.0

    def unnormalize(self, key: str, x: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`normalize`."""
        if self._mode(key) == "mean_std":
            return x * self._get(key, "std", x).clamp_min(self.eps) + self._get(key, "mean", x)
        lo, hi = self._range(key, x)
        return (x + 1.0) / 2.0 * (hi - lo).clamp_min(self.eps) + lo

    @classmethod
    def from_file(cls, path: str | Path, modes: dict[str, NormMode] | NormMode = "mean_std") -> Normalizer:
        """Loads stats from safetensors and builds a normaliser."""
        return cls(load_stats(path), modes)
