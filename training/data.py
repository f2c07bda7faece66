"""Training data: episodes of LeRobotDataset v3 folders held in memory, sampled as (observation, chunk).

All frames of all episodes are loaded once (``vla.data.reader.load_episode``), so a training step costs
no decoding. 200 pick-and-place episodes at 96x96 with two cameras take ~0.5 GB.

Plain LeRobot v3 datasets (written by lerobot, without our sidecar) are read as they are: no
``complementary_info.is_intervention`` column means no interventions, episode metadata comes from
lerobot's episode table (:func:`vla.data.reader.read_episode_info`), ``data.keys`` maps their feature names
onto the policy's inputs, and ``data.repo_id`` finds one in the local Hugging Face cache, offline.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from vla.batch import ACTION, ACTION_IS_PAD, IMAGE_PREFIX, STATE, TASK, Batch
from vla.data.reader import feature_names, iter_episodes, read_episode_info
from vla.data.schema import IS_INTERVENTION, REWARD, SIDECAR_FILE, SUCCESS, EpisodeMeta
from vla.data.sidecar import is_vla_dataset
from vla.data.stats import array_stats
from vla.errors import InputError


@dataclass
class KeyMap:
    """Which dataset feature feeds each policy input, for datasets whose names differ from ours
    (``vla-train data.keys.image.agentview=observation.images.top data.keys.state=observation.joints``)."""

    image: dict[str, str] = field(default_factory=dict)  # camera -> feature (else observation.images.<cam>)
    state: str = STATE
    action: str = ACTION

    def image_key(self, camera: str) -> str:
        """The dataset feature read as camera ``camera``."""
        return self.image.get(camera, IMAGE_PREFIX + camera)


@dataclass
class DataConfig:
    """Where the episodes come from and how they are sampled."""

    roots: list[str] = field(default_factory=list)  # LeRobotDataset v3 folders
    # a dataset in the local Hugging Face cache, read offline (HF_HUB_OFFLINE=1) beside ``roots``: first
    # $HF_LEROBOT_HOME/<repo_id>, then the hub cache's snapshot (see :func:`resolve_repo_id`)
    repo_id: str | None = None
    keys: KeyMap = field(default_factory=KeyMap)  # dataset feature names of the policy's inputs
    max_episodes: int | None = None  # per root: use the first N episodes
    only_success: bool = False
    random_shift: int = 4  # pixels of random-shift image augmentation (DrQ-style); 0 = off

    def __post_init__(self) -> None:
        if self.random_shift < 0:
            raise ValueError(f"random_shift={self.random_shift} must be >= 0")
        if isinstance(self.keys, dict):
            self.keys = KeyMap(**self.keys)

    def resolved_roots(self) -> list[str]:
        """``roots`` and, when ``repo_id`` is set, its folder in the local cache (:func:`resolve_repo_id`)."""
        return [*self.roots, *([str(resolve_repo_id(self.repo_id))] if self.repo_id else [])]


def resolve_repo_id(repo_id: str) -> Path:
    """The local folder of dataset ``repo_id``, offline, where lerobot (``HF_HUB_OFFLINE=1``) looks:
    ``$HF_LEROBOT_HOME/<repo_id>`` (lerobot's ``HF_LEROBOT_HOME``; the env variable wins), then the snapshot
    in lerobot's hub cache (``$HF_LEROBOT_HOME/hub``) and in the Hugging Face hub cache
    (``snapshot_download(repo_id, repo_type="dataset", local_files_only=True)``).

    Raises:
        InputError: Not found: one line naming the places searched.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.constants import HF_HUB_CACHE
    from lerobot.utils.constants import HF_LEROBOT_HOME

    home = Path(os.environ.get("HF_LEROBOT_HOME") or HF_LEROBOT_HOME).expanduser()
    searched = [str(home / repo_id)]
    if (home / repo_id / "meta/info.json").is_file():
        return home / repo_id
    for cache_dir in (home / "hub", None):  # lerobot's hub cache, then huggingface_hub's default
        for revision in ("v3.0", None):  # lerobot downloads the codebase-version tag
            try:
                folder = Path(
                    snapshot_download(
                        repo_id,
                        repo_type="dataset",
                        revision=revision,
                        cache_dir=cache_dir,
                        local_files_only=True,
                    )
                )
            except Exception:  # not cached (LocalEntryNotFoundError), a malformed repo id, ...
                continue
            if (folder / "meta/info.json").is_file():
                return folder
        searched.append(f"the hub cache {cache_dir or HF_HUB_CACHE}")
    raise InputError(
        f"data.repo_id={repo_id}: not found offline; searched {', '.join(searched)}: download it first "
        "(e.g. huggingface-cli download --repo-type dataset <repo_id>) or pass its folder in data.roots"
    )


class ChunkDataset:
    """In-memory frames; ``sample`` draws B (frame, next-H-actions) pairs, padding past episode ends.

    Besides the observations and actions it keeps each frame's episode structure (``episode_id``,
    ``frame_index``, ``episode_start``/``episode_end``, ``is_intervention``) and each episode's metadata
    (``episodes``: success, source, ...), which critics turn into credit. Derived per-frame columns
    (an advantage indicator, a weight) go into ``labels`` and come with every batch under their names;
    they never overwrite the source data.
    """

    def __init__(self, cfg: DataConfig, cameras: list[str], chunk_size: int, progress: bool = True) -> None:
        roots = cfg.resolved_roots()
        if not roots:
            raise ValueError("data.roots is empty: give at least one dataset folder (or data.repo_id)")
        self.cfg, self.cameras, self.H = cfg, list(cameras), chunk_size
        images: dict[str, list[np.ndarray]] = {c: [] for c in cameras}
        states, actions, tasks, ends, human = [], [], [], [], []
        self.episodes: list[EpisodeMeta] = []
        self.episode_roots: list[str] = []  # [E] the dataset folder of each episode
        self.roots_without_interventions: list[str] = []  # datasets with no is_intervention column
        k = cfg.keys
        n = 0
        for root in map(Path, roots):
            has_human = IS_INTERVENTION in feature_names(root)  # LeRobot datasets without it: all autonomous
            if not has_human:
                self.roots_without_interventions.append(str(root))
            keys = [k.image_key(c) for c in cameras] + [k.state, k.action] + [IS_INTERVENTION] * has_human
            infos = read_episode_info(root)[: cfg.max_episodes]
            if cfg.only_success:
                if any(i.success is None for i in infos):
                    raise InputError(missing_success(root, "data.only_success=true"))
                infos = [i for i in infos if i.success]
            by_index = {i.episode_index: i for i in infos}
            episodes = iter_episodes(root, list(by_index), keys=keys)
            for index, ep in tqdm(
                episodes, total=len(infos), desc=f"loading {root.name}", disable=not progress, unit="ep"
            ):
                t = len(ep[k.action])
                for c in cameras:
                    images[c].append(ep[k.image_key(c)])
                states.append(ep[k.state].astype(np.float32).reshape(t, -1))
                actions.append(ep[k.action].astype(np.float32).reshape(t, -1))
                tasks += [by_index[index].task] * t
                ends.append(np.full(t, n + t))
                human.append(
                    ep[IS_INTERVENTION].reshape(-1).astype(bool) if has_human else np.zeros(t, dtype=bool)
                )
                self.episodes.append(by_index[index])
                self.episode_roots.append(str(root))
                n += t
        if n == 0:
            raise ValueError(f"no frames in {roots}")
        self.images = {
            c: torch.from_numpy(np.concatenate(v)) for c, v in images.items()
        }  # uint8 [N, H, W, 3]
        self.state = torch.from_numpy(np.concatenate(states))  # [N, S]
        self.action = torch.from_numpy(np.concatenate(actions))  # [N, A]
        self.tasks = tasks
        self.episode_end = torch.from_numpy(np.concatenate(ends))  # [N] one past the episode's last frame
        self.is_intervention = torch.from_numpy(np.concatenate(human))  # [N] bool
        lengths = torch.tensor([len(a) for a in actions])
        self.episode_id = torch.repeat_interleave(torch.arange(len(lengths)), lengths)  # [N]
        self.episode_start = self.episode_end - lengths[self.episode_id]  # [N]
        self.episode_lengths = lengths  # [E]
        self.episode_offsets = torch.cumsum(lengths, 0) - lengths  # [E] first frame of each episode
        self.frame_index = torch.arange(n) - self.episode_start  # [N] t within its episode
        self.num_episodes = len(states)
        self.labels: dict[str, Tensor] = {}  # derived per-frame columns [N, ...], added to batches
        self.sampling_weights: Tensor | None = None  # [N] >= 0: frames drawn in proportion (None: uniform)

    def __len__(self) -> int:
        return len(self.action)

    def episode_frames(self, e: int) -> slice:
        """The frames of episode ``e`` (its position in ``episodes``)."""
        start = int(self.episode_offsets[e])
        return slice(start, start + int(self.episode_lengths[e]))

    def observations(self, idx: Tensor) -> Batch:
        """Images, state and instruction of frames ``idx`` (no augmentation, no actions)."""
        batch: Batch = {STATE: self.state[idx], TASK: [self.tasks[i] for i in idx.tolist()]}
        for c in self.cameras:
            batch[IMAGE_PREFIX + c] = self.images[c][idx].permute(0, 3, 1, 2).float().div_(255.0)
        return batch

    def stats(self) -> dict[str, dict[str, np.ndarray]]:
        return {STATE: array_stats(self.state.numpy()), ACTION: array_stats(self.action.numpy())}

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        if self.sampling_weights is None:
            idx = torch.randint(len(self), (batch_size,), generator=generator)  # [B]
        else:  # an algorithm's sampling design (e.g. APO's balanced desirable / undesirable batches)
            idx = torch.multinomial(self.sampling_weights, batch_size, replacement=True, generator=generator)
        return self.get(idx, generator)

    def get(self, idx: Tensor, generator: torch.Generator | None = None) -> Batch:
        steps = idx[:, None] + torch.arange(self.H)[None]  # [B, H]
        end = self.episode_end[idx][:, None]
        pad = steps >= end
        steps = torch.minimum(steps, end - 1)  # repeat the last action past the end
        batch: Batch = {STATE: self.state[idx], ACTION: self.action[steps], ACTION_IS_PAD: pad}
        batch[TASK] = [self.tasks[i] for i in idx.tolist()]
        for name, column in self.labels.items():
            batch[name] = column[idx]
        for c in self.cameras:
            img = self.images[c][idx].permute(0, 3, 1, 2).float().div_(255.0)  # [B, 3, H, W]
            if self.cfg.random_shift and generator is not None:
                img = random_shift(img, self.cfg.random_shift, generator)
            batch[IMAGE_PREFIX + c] = img
        return batch


DEFAULT_CAMERAS = ["agentview", "wrist"]  # what a policy config without ``cameras`` reads


def missing_success(root: str | Path, who: str) -> str:
    """The one-line refusal of ``who`` (``algo=recap``, ``data.only_success=true``), which needs episode
    outcomes, on a dataset without them."""
    return (
        f"{root}: {who} needs episode success, which this dataset lacks: no '{SUCCESS}' or '{REWARD}' "
        f"column and no {SIDECAR_FILE} 'success'; add a '{SUCCESS}' column (any true frame = a successful "
        "episode)"
    )


def check_labels(cfg: DataConfig, who: str, *, success: bool, takeovers: bool) -> None:
    """Refuses, from the metadata alone (before any folder or loading), datasets without the labels ``who``
    needs: episode outcomes (our sidecar, or a ``next.success`` / ``next.reward`` column) or human takeovers
    (a ``complementary_info.is_intervention`` column). :func:`training.algorithms.base.require_labels` checks
    the loaded episodes again.

    Raises:
        InputError: One line naming the dataset and the missing field.
    """
    for root in cfg.resolved_roots():
        features = _features(root)
        if success and not (is_vla_dataset(root) or SUCCESS in features or REWARD in features):
            raise InputError(missing_success(root, who))
        if takeovers and IS_INTERVENTION not in features:
            raise InputError(
                f"{root}: {who} needs human takeovers: feature '{IS_INTERVENTION}' missing from the dataset "
                "(record with interventions marked, or use another algo)"
            )


def _features(root: str) -> dict[str, Any]:
    return json.loads((Path(root) / "meta/info.json").read_text())["features"]


def check_policy_inputs(cfg: DataConfig, policy: dict[str, Any], init_from: str | None = None) -> None:
    """The policy's inputs against every dataset, before anything is loaded.

    Each camera the policy reads (the ``cameras`` of ``policy``, the fresh policy's fields, or of the
    ``init_from`` checkpoint's config; after ``data.keys.image``) must be an image feature of the dataset;
    the datasets must agree on the state and action sizes, and a checkpoint's must match them (a fresh
    policy takes the data's: :func:`with_data_dims`).

    Raises:
        InputError: One line: the dataset, the policy's inputs, the dataset's features, the override.
    """
    where = f"checkpoint {init_from}" if init_from else "policy"
    if init_from:
        from vla.checkpoint import read_config

        policy = read_config(init_from)
    k = cfg.keys
    cameras = list(policy.get("cameras", DEFAULT_CAMERAS))
    sizes: dict[str, tuple[str, int]] = {}
    for root in cfg.resolved_roots():
        features = _features(root)
        missing = [c for c in cameras if k.image_key(c) not in features]
        if missing:
            raise InputError(_camera_refusal(root, features, cameras, missing, k, where))
        for name, key in (("state_dim", k.state), ("action_dim", k.action)):
            size = int(np.prod(features[key]["shape"])) if key in features else -1
            first = sizes.setdefault(name, (root, size))
            if size != first[1]:
                raise InputError(
                    f"{root}: '{key}' has {size} values but {first[0]} has {first[1]}: train on datasets of "
                    "one robot layout (or map the features with data.keys.state / data.keys.action)"
                )
            fixed = policy.get(name) if where != "policy" else None
            if fixed is not None and int(fixed) != size:
                group = name.split("_")[0]
                raise InputError(
                    f"{root}: '{key}' has {size} values but {where} was trained with {name}={fixed}: use a "
                    f"dataset of its robot layout (or data.keys.{group}=<a feature of {fixed} values>)"
                )


def _camera_refusal(
    root: str, features: dict[str, Any], cameras: list[str], missing: list[str], k: KeyMap, where: str
) -> str:
    reads = ", ".join(f"{c}={k.image_key(c)}" for c in cameras)
    images = [f for f, ft in features.items() if ft.get("dtype") in ("image", "video")]
    free = [f for f in images if f not in {k.image_key(c) for c in cameras}]
    fix = [f"data.keys.image.{c}={f}" for c, f in zip(missing, free, strict=False)]
    if len(free) < len(missing):
        present = [c for c in cameras if c not in missing[len(free) :]]
        fix.append(
            f"policy.cameras=[{','.join(present)}]"
            if where == "policy"
            else f"(the checkpoint needs {len(cameras)} cameras; the dataset has {len(images)})"
        )
    return (
        f"{root}: {where} reads cameras [{reads}] but the dataset's image features are "
        f"[{', '.join(images)}]: pass {' '.join(fix)}"
    )


def with_data_dims(spec: dict[str, Any], data: ChunkDataset) -> dict[str, Any]:
    """A fresh policy's config with ``state_dim`` / ``action_dim`` (where its config has them) set to the
    data's: a new model takes the sizes of what it learns from (a 6-d SO-101 state, an 8-d Panda one)."""
    from vla.policy import POLICIES

    cls = POLICIES.get(spec["type"])
    names = {f.name for f in dataclasses.fields(cls.config_class)}
    out = dict(spec)
    for name, size in (("state_dim", int(data.state.shape[1])), ("action_dim", int(data.action.shape[1]))):
        if name in names:
            if int(out.get(name, size)) != size:
                print(f"policy.{name}={out[name]} -> {size}: a fresh policy takes the data's size")
            out[name] = size
    return out


def random_shift(img: Tensor, pad: int, generator: torch.Generator) -> Tensor:
    """Pad by edge replication and crop back at a random offset per sample (DrQ): [B, C, H, W]."""
    b, _, h, w = img.shape
    padded = torch.nn.functional.pad(img, (pad, pad, pad, pad), mode="replicate")
    dy = torch.randint(0, 2 * pad + 1, (b,), generator=generator).tolist()
    dx = torch.randint(0, 2 * pad + 1, (b,), generator=generator).tolist()
    return torch.stack(
        [padded[i, :, y : y + h, x : x + w] for i, (y, x) in enumerate(zip(dy, dx, strict=True))]
    )
