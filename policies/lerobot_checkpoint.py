"""Checkpoint I/O of the LeRobot VLA adapters (:class:`policies.lerobot_adapter.LeRobotFlowAdapter`).

- Our checkpoint: a :mod:`vla.checkpoint` folder (``model.safetensors``, ``config.yaml``,
  ``stats.safetensors``, ``train_state/``) plus ``<asset_dir>/``, the small files of the adapter's asset
  folder (the backbone's or tokenizer's config, tokenizer, processor; never weights), so that loading needs
  neither the network nor the original folder.
- A LeRobot policy folder as ``save_pretrained`` writes it (``config.json``, ``model.safetensors`` keyed
  ``model.*``, the preprocessor's normaliser statistics), read offline, weight for weight.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, ClassVar, Protocol

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from policies.lerobot_config import LeRobotAdapterConfig
from vla.batch import ACTION, IMAGE_PREFIX, STATE
from vla.checkpoint import STATS_FILE, Stats, load_model_state, load_stats, read_config, save_checkpoint

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".msgpack", ".h5")


class Adapter(Protocol):
    """What checkpoint I/O uses of an adapter (:class:`policies.lerobot_adapter.LeRobotFlowAdapter`)."""

    config_class: ClassVar[type[LeRobotAdapterConfig]]
    asset_dir: ClassVar[str]  # checkpoint sub-folder holding the copied asset files
    asset_field: ClassVar[str]  # config field naming the local asset folder (backbone or tokenizer)
    lerobot_types: ClassVar[tuple[str, ...]]  # LeRobot ``config.json`` types this adapter loads
    config: LeRobotAdapterConfig
    stats: Stats
    model: Any  # the LeRobot network (``state_dict`` / ``load_state_dict``)

    def __init__(self, config: Any, stats: Stats | None) -> None: ...

    def _fix_lerobot_keys(self, state: dict[str, Tensor]) -> dict[str, Tensor]: ...

    def to(self, device: str | torch.device) -> Any: ...


def save_adapter(
    policy: Adapter,
    directory: str | Path,
    train_state: dict | None = None,
    weights: dict[str, Tensor] | None = None,
) -> Path:
    """Writes our checkpoint folder (``weights``: the network's state dict, if not the live one); the asset
    files are staged first, so re-saving over the folder the adapter was loaded from keeps them."""
    directory = Path(directory)
    staged = directory.with_name(f"{directory.name}.{policy.asset_dir}.tmp")
    shutil.rmtree(staged, ignore_errors=True)
    copy_small_files(Path(getattr(policy.config, policy.asset_field)), staged)  # before the old folder goes
    path = save_checkpoint(
        directory,
        model=unshared(weights or policy.model.state_dict()),
        config=asdict(policy.config),
        stats=policy.stats,
        train_state=train_state,
    )
    staged.rename(path / policy.asset_dir)
    return path


def load_adapter[A: Adapter](cls: type[A], directory: str | Path, device: str | torch.device = "cpu") -> A:
    """An adapter of class ``cls`` from our checkpoint folder, on ``device``, in eval mode."""
    directory = Path(directory)
    raw = read_config(directory)
    known = {f.name for f in fields(cls.config_class)}
    unknown = set(raw) - known
    if unknown:
        raise KeyError(f"{directory / 'config.yaml'}: unknown fields {sorted(unknown)}")
    raw.update(cls.config_class.checkpoint_overrides())
    if (directory / cls.asset_dir).is_dir():
        raw[cls.asset_field] = str(directory / cls.asset_dir)
    policy = cls(cls.config_class(**raw), load_stats(directory / STATS_FILE))
    policy.model.load_state_dict(load_model_state(directory))
    return policy.to(device).eval()


def load_lerobot_weights(policy: Adapter, path: str | Path) -> None:
    """Loads a LeRobot policy's ``model.safetensors`` into ``policy.model`` (keys ``model.*``; older layouts
    are renamed by the adapter's ``_fix_lerobot_keys``); only the indicator (ours) may be missing."""
    state = load_file(str(Path(path) / "model.safetensors"))
    state = {
        k if k.startswith("model.") else f"model.{k}": v for k, v in policy._fix_lerobot_keys(state).items()
    }
    result = policy.model.load_state_dict(
        {k.removeprefix("model."): v for k, v in state.items()}, strict=False
    )
    # LeRobot writes tied weights once (safetensors' save_model): a key tied to a loaded one is fine
    own = policy.model.state_dict()
    loaded = {own[k].data_ptr() for k in own.keys() - set(result.missing_keys)}
    missing = [k for k in result.missing_keys if own[k].data_ptr() not in loaded]
    missing = [k for k in missing if not k.startswith("indicator.")]
    if missing or result.unexpected_keys:
        raise KeyError(
            f"{path}/model.safetensors does not match this {policy.config.type}: missing {missing}, "
            f"unexpected {sorted(result.unexpected_keys)}"
        )


def adapter_from_lerobot[A: Adapter](
    cls: type[A], path: str | Path, stats: Stats | None, overrides: dict[str, object]
) -> A:
    """An adapter of class ``cls`` from a LeRobot policy folder: its config translated
    (:meth:`policies.lerobot_config.LeRobotAdapterConfig.from_lerobot`, then ``overrides``), its weights
    loaded at construction (``pretrained_path``), ``stats`` or else the folder's normaliser statistics."""
    path = Path(path)
    lr = json.loads((path / "config.json").read_text())
    if lr.get("type") not in cls.lerobot_types:
        raise ValueError(f"{path}/config.json: type {lr.get('type')!r}, not one of {cls.lerobot_types}")
    cfg = cls.config_class.from_lerobot(lr, {**overrides, "pretrained_path": str(path)}, path)
    return cls(cfg, stats if stats is not None else lerobot_stats(path))


def save_lerobot_folder(policy: Adapter, folder: str | Path, prefixed: bool = True) -> Path:
    """``policy`` as LeRobot's ``save_pretrained`` writes a policy folder (the inverse of
    :func:`adapter_from_lerobot`): ``config.json`` by the network's LeRobot config class with the adapter's
    cameras, image size and state/action widths as features; the network's weights keyed ``model.*`` (or
    unprefixed, as older folders are), without our indicator; the normaliser's statistics. For a network
    LeRobot's config cannot size (a tiny pi0.5), loading it back needs the sizes as overrides."""
    from lerobot.configs.types import FeatureType, PolicyFeature

    folder = Path(folder)
    c = policy.config
    visual = (3, *c.image_size)
    features = {
        f"{IMAGE_PREFIX}{cam}": PolicyFeature(type=FeatureType.VISUAL, shape=visual) for cam in c.cameras
    }
    features[STATE] = PolicyFeature(type=FeatureType.STATE, shape=(c.state_dim,))
    lerobot_config = type(policy.model.config)(
        **c.lerobot_kwargs(),
        input_features=features,
        output_features={ACTION: PolicyFeature(type=FeatureType.ACTION, shape=(c.action_dim,))},
    )
    folder.mkdir(parents=True)
    lerobot_config._save_pretrained(folder)
    weights = {k: v.clone() for k, v in policy.model.state_dict().items() if not k.startswith("indicator.")}
    save_file(
        {f"model.{k}" if prefixed else k: v for k, v in weights.items()}, str(folder / "model.safetensors")
    )
    stats = {f"{k}.{s}": torch.as_tensor(v).float() for k, d in policy.stats.items() for s, v in d.items()}
    save_file(stats, str(folder / "policy_preprocessor_step_3_normalizer_processor.safetensors"))
    return folder


def lerobot_stats(path: str | Path) -> Stats:
    """State/action statistics from a LeRobot policy folder's normaliser state (``<key>.<stat>`` tensors)."""
    files = sorted(Path(path).glob("policy_preprocessor*normalizer*.safetensors"))
    if not files:
        raise FileNotFoundError(
            f"{path}: no policy_preprocessor*normalizer*.safetensors; "
            f"pass stats= with '{STATE}' and '{ACTION}'"
        )
    out: Stats = {}
    for flat, value in load_file(str(files[0])).items():
        key, stat = flat.rsplit(".", 1)
        out.setdefault(key, {})[stat] = value.float().numpy()
    for key in (STATE, ACTION):
        if key not in out:
            raise KeyError(f"{files[0]}: no statistics for '{key}'; it has {sorted(out)}")
    return out


def copy_small_files(src: Path, dst: Path) -> None:
    """Copies a backbone/tokenizer folder's small files (config, tokenizer, processor), never its weights."""
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file() and f.suffix not in _WEIGHT_SUFFIXES:
            shutil.copy2(f, dst / f.name)


def unshared(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """safetensors refuses tensors that share storage (tied weights): clone the repeats."""
    seen: set[int] = set()
    out = {}
    for k, v in state.items():
        ptr = v.untyped_storage().data_ptr()
        out[k] = v.clone() if ptr in seen else v
        seen.add(ptr)
    return out
