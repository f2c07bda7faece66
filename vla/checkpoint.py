"""Checkpoint folders: ``model.safetensors``, ``config.yaml``, ``stats.safetensors``, ``train_state/``.

No pickle is ever written or loaded: optimizer and RNG states are split into tensors (safetensors) and a
JSON skeleton that says where each tensor goes. Folders are written to a temporary sibling and renamed,
so a crash never leaves a half-written checkpoint under the final name.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from safetensors.torch import load_file, save_file
from torch import Tensor

from vla.data.stats import load_stats, save_stats  # noqa: F401  (re-exported: stats live in checkpoints)

MODEL_FILE = "model.safetensors"
CONFIG_FILE = "config.yaml"
STATS_FILE = "stats.safetensors"
TRAIN_STATE_DIR = "train_state"

Stats = dict[str, dict[str, np.ndarray]]


def flatten_state(obj: Any, tensors: dict[str, Tensor], path: str = "s") -> Any:
    """Replace every tensor / ndarray in a nested structure by ``{"__tensor__": key}``; fill ``tensors``."""
    if isinstance(obj, Tensor):
        tensors[path] = obj.detach().cpu().contiguous()
        return {"__tensor__": path}
    if isinstance(obj, np.ndarray):
        tensors[path] = torch.from_numpy(np.ascontiguousarray(obj))
        return {"__ndarray__": path}
    if isinstance(obj, dict):
        if not all(isinstance(k, (str, int)) for k in obj):
            raise TypeError(f"{path}: only str/int dict keys can be stored")
        return {"__dict__": [[k, flatten_state(v, tensors, f"{path}.{k}")] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        items = [flatten_state(v, tensors, f"{path}.{i}") for i, v in enumerate(obj)]
        return {"__tuple__": items} if isinstance(obj, tuple) else items
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"{path}: cannot store {type(obj).__name__} in a checkpoint")


def unflatten_state(obj: Any, tensors: dict[str, Tensor]) -> Any:
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__ndarray__" in obj:
            return tensors[obj["__ndarray__"]].numpy()
        if "__dict__" in obj:
            return {k: unflatten_state(v, tensors) for k, v in obj["__dict__"]}
        if "__tuple__" in obj:
            return tuple(unflatten_state(v, tensors) for v in obj["__tuple__"])
        raise ValueError(f"unknown checkpoint node {list(obj)}")
    if isinstance(obj, list):
        return [unflatten_state(v, tensors) for v in obj]
    return obj


def read_config(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / CONFIG_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: not a checkpoint folder")
    return yaml.safe_load(path.read_text())


def publish(tmp: Path, final: Path) -> Path:
    """Move a fully written folder ``tmp`` to ``final``, replacing an older one (by rename: never torn)."""
    old = final.with_name(final.name + ".old")
    if final.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def staging_dir(final: str | Path) -> Path:
    """A fresh temporary sibling of ``final`` to write a checkpoint into before :func:`publish`."""
    final = Path(final)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def save_train_state(directory: str | Path, train_state: dict[str, Any]) -> None:
    folder = Path(directory) / TRAIN_STATE_DIR
    folder.mkdir(exist_ok=True)
    tensors: dict[str, Tensor] = {}
    skeleton = flatten_state(train_state, tensors)
    save_file(tensors, str(folder / "tensors.safetensors"))
    (folder / "state.json").write_text(json.dumps(skeleton))


def save_checkpoint(
    directory: str | Path,
    *,
    model: dict[str, Tensor],
    config: dict[str, Any],
    stats: Stats | None = None,
    train_state: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint folder atomically (temporary sibling + rename). Sharded tensors (an FSDP model's
    DTensors) are gathered whole first, which every rank holding a shard must do at the same call."""
    final = Path(directory)
    tmp = staging_dir(final)
    whole = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in model.items()}
    save_file({k: v.detach().cpu().contiguous() for k, v in whole.items()}, str(tmp / MODEL_FILE))
    (tmp / CONFIG_FILE).write_text(yaml.safe_dump(config, sort_keys=False))
    if stats is not None:
        save_stats(tmp / STATS_FILE, stats)
    if train_state is not None:
        save_train_state(tmp, train_state)
    return publish(tmp, final)


def load_model_state(directory: str | Path) -> dict[str, Tensor]:
    path = Path(directory) / MODEL_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} not found")
    return load_file(str(path))


def load_train_state(directory: str | Path) -> dict[str, Any] | None:
    folder = Path(directory) / TRAIN_STATE_DIR
    if not folder.exists():
        return None
    tensors = load_file(str(folder / "tensors.safetensors"))
    return unflatten_state(json.loads((folder / "state.json").read_text()), tensors)
