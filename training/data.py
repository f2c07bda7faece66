"""Training data: episodes of LeRobotDataset v3 folders held in memory, sampled as (observation, chunk).

All frames of all episodes are loaded once (``vla.data.reader.load_episode``), so a training step costs
no decoding. 200 pick-and-place episodes at 96x96 with two cameras take ~0.5 GB.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from tqdm import tqdm

from vla.batch import ACTION, ACTION_IS_PAD, IMAGE_PREFIX, STATE, TASK, Batch
from vla.data.reader import feature_names, iter_episodes, read_episode_info
from vla.data.schema import IS_INTERVENTION, EpisodeMeta
from vla.data.stats import array_stats


@dataclass
class DataConfig:
    """Where the episodes come from and how they are sampled."""

    roots: list[str] = field(default_factory=list)  # LeRobotDataset v3 folders
    max_episodes: int | None = None  # per root: use the first N episodes
    only_success: bool = False
    random_shift: int = 4  # pixels of random-shift image augmentation (DrQ-style); 0 = off

    def __post_init__(self) -> None:
        if self.random_shift < 0:
            raise ValueError(f"random_shift={self.random_shift} must be >= 0")


class ChunkDataset:
    """In-memory frames; ``sample`` draws B (frame, next-H-actions) pairs, padding past episode ends.

    Besides the observations and actions it keeps each frame's episode structure (``episode_id``,
    ``frame_index``, ``episode_start``/``episode_end``, ``is_intervention``) and each episode's metadata
    (``episodes``: success, source, ...), which critics turn into credit. Derived per-frame columns
    (an advantage indicator, a weight) go into ``labels`` and come with every batch under their names;
    they never overwrite the source data.
    """

    def __init__(self, cfg: DataConfig, cameras: list[str], chunk_size: int, progress: bool = True) -> None:
        if not cfg.roots:
            raise ValueError("data.roots is empty: give at least one dataset folder")
        self.cfg, self.cameras, self.H = cfg, list(cameras), chunk_size
        images: dict[str, list[np.ndarray]] = {c: [] for c in cameras}
        states, actions, tasks, ends, human = [], [], [], [], []
        self.episodes: list[EpisodeMeta] = []
        n = 0
        for root in map(Path, cfg.roots):
            has_human = IS_INTERVENTION in feature_names(root)  # LeRobot datasets without it: all autonomous
            keys = [IMAGE_PREFIX + c for c in cameras] + [STATE, ACTION] + [IS_INTERVENTION] * has_human
            infos = [
                i for i in read_episode_info(root)[: cfg.max_episodes] if i.success or not cfg.only_success
            ]
            by_index = {i.episode_index: i for i in infos}
            episodes = iter_episodes(root, list(by_index), keys=keys)
            for index, ep in tqdm(
                episodes, total=len(infos), desc=f"loading {root.name}", disable=not progress, unit="ep"
            ):
                t = len(ep[ACTION])
                for c in cameras:
                    images[c].append(ep[IMAGE_PREFIX + c])
                states.append(ep[STATE].astype(np.float32))
                actions.append(ep[ACTION].astype(np.float32))
                tasks += [by_index[index].task] * t
                ends.append(np.full(t, n + t))
                human.append(
                    ep[IS_INTERVENTION].reshape(-1).astype(bool) if has_human else np.zeros(t, dtype=bool)
                )
                self.episodes.append(by_index[index])
                n += t
        if n == 0:
            raise ValueError(f"no frames in {cfg.roots}")
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


def random_shift(img: Tensor, pad: int, generator: torch.Generator) -> Tensor:
    """Pad by edge replication and crop back at a random offset per sample (DrQ): [B, C, H, W]."""
    b, _, h, w = img.shape
    padded = torch.nn.functional.pad(img, (pad, pad, pad, pad), mode="replicate")
    dy = torch.randint(0, 2 * pad + 1, (b,), generator=generator).tolist()
    dx = torch.randint(0, 2 * pad + 1, (b,), generator=generator).tolist()
    return torch.stack(
        [padded[i, :, y : y + h, x : x + w] for i, (y, x) in enumerate(zip(dy, dx, strict=True))]
    )
