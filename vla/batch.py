"""Keys and shapes of the tensors that flow between data, policies, critics and the runtime.

A **batch** (training) is a dict:

- ``observation.images.<cam>``: float32 [B, 3, H, W] in [0, 1]
- ``observation.state``: float32 [B, S] (raw units; the policy normalises)
- ``task``: list[str] of B instructions
- ``action``: float32 [B, H, A] (raw units), the chunk starting at the observation
- ``action_is_pad``: bool [B, H], True where the chunk ran past the episode end

An **observation** (inference) is the same without ``action``/``action_is_pad``. Policies own their
normalisation statistics; nothing outside a policy sees normalised values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from vla.data.schema import ACTION, IMAGE_PREFIX, STATE, TASK

ACTION_IS_PAD = "action_is_pad"

Batch = dict[str, Any]


def image_keys(batch: Batch) -> list[str]:
    """Camera keys present in a batch or observation, sorted (a stable camera order)."""
    return sorted(k for k in batch if k.startswith(IMAGE_PREFIX))


def observation_from_env(obs: dict, cameras: list[str], device: str | torch.device = "cpu") -> Batch:
    """Turn one env observation (uint8 HxWx3 images, ``state``, ``instruction``) into a batch of one."""
    out: Batch = {}
    for cam in cameras:
        img = torch.from_numpy(np.ascontiguousarray(obs[cam])).to(device)
        out[IMAGE_PREFIX + cam] = img.permute(2, 0, 1).unsqueeze(0).float().div_(255.0)  # [1, 3, H, W]
    out[STATE] = torch.as_tensor(obs["state"], dtype=torch.float32, device=device).unsqueeze(0)  # [1, S]
    out[TASK] = [obs["instruction"]]
    return out


def batch_size(batch: Batch) -> int:
    return int(batch[STATE].shape[0])


def repeat_batch(batch: Batch, m: int) -> Batch:
    """Each sample ``m`` times in a row (``repeat_interleave`` order): [B, ...] -> [B * m, ...]."""
    if m == 1:
        return batch
    return {
        k: v.repeat_interleave(m, 0) if isinstance(v, Tensor) else [x for x in v for _ in range(m)]
        for k, v in batch.items()
    }


def to_device(batch: Batch, device: str | torch.device) -> Batch:
    return {k: v.to(device, non_blocking=True) if isinstance(v, Tensor) else v for k, v in batch.items()}


__all__ = ["ACTION", "ACTION_IS_PAD", "IMAGE_PREFIX", "STATE", "TASK", "Batch", "image_keys"]


def masked_chunk_mean(err: Tensor, batch: Batch) -> Tensor:
    """Per-sample mean of a per-step error [B, H] over the chunk steps that are not padding -> [B]."""
    if ACTION_IS_PAD not in batch:
        return err.mean(-1)
    valid = ~batch[ACTION_IS_PAD].to(err.device)
    return (err * valid).sum(-1) / valid.sum(-1).clamp_min(1)
