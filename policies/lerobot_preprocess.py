"""Pre-processing for the LeRobot VLA adapters: a raw batch (``vla.batch`` keys, raw units) in a LeRobot flow
network's terms. What LeRobot's processor pipeline does, without the pipeline:

- state: normalised with :class:`vla.data.stats.Normalizer` (the statistics stored in the checkpoint), then
  zero-padded to ``max_state_dim`` (LeRobot's ``pad_vector``);
- images: each configured camera through the adapter's image hook (resize with padding, [0, 1] -> [-1, 1]),
  every image valid;
- prompt: the adapter's prompt hook (the instruction; pi0.5 also writes the state), tokenised, right-padded
  to ``pad_language_to``, truncated to ``tokenizer_max_length``;
- actions and noise: normalised actions and eps zero-padded to ``max_action_dim``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from lerobot.policies.common.vla_utils import pad_vector
from torch import Tensor

from policies.lerobot_config import LeRobotAdapterConfig
from vla.batch import ACTION, IMAGE_PREFIX, STATE, TASK, Batch
from vla.checkpoint import Stats
from vla.data.stats import Normalizer
from vla.sharding import draw


def identity_stats(cfg: LeRobotAdapterConfig) -> Stats:
    """Statistics under which every normalisation mode is the identity (an adapter built without stats)."""

    def unit(n: int) -> dict[str, np.ndarray]:
        z, o = np.zeros(n), np.ones(n)
        return {"mean": z, "std": o, "min": -o, "max": o, "q01": -o, "q99": o}

    return {STATE: unit(cfg.state_dim), ACTION: unit(cfg.action_dim)}


@dataclass
class FlowInputs:
    """One observation batch in the network's terms."""

    images: list[Tensor]  # per camera [B, 3, h, w] in [-1, 1]
    img_masks: list[Tensor]  # per camera [B] bool
    tokens: Tensor  # [B, L] prompt token ids
    token_mask: Tensor  # [B, L] bool
    state: Tensor  # [B, S_max] normalised and zero-padded

    @property
    def batch_size(self) -> int:
        return int(self.tokens.shape[0])


def flow_inputs(
    obs: Batch,
    cfg: LeRobotAdapterConfig,
    normalizer: Normalizer,
    tokenizer: Any,
    *,
    image: Callable[[Tensor], Tensor],
    prompts: Callable[[Sequence[str], Tensor], list[str]],
    device: torch.device,
) -> FlowInputs:
    """The network's inputs from an observation batch; ``image`` and ``prompts`` are the adapter's hooks
    (``[B, 3, H, W]`` in [0, 1] -> the network's image; instructions and normalised state [B, S] -> text)."""
    missing = [IMAGE_PREFIX + c for c in cfg.cameras if IMAGE_PREFIX + c not in obs]
    missing += [k for k in (STATE, TASK) if k not in obs]
    if missing:
        raise KeyError(f"observation lacks {missing}; it has {sorted(obs)}")
    state = obs[STATE].to(device).float()
    if state.shape[-1] != cfg.state_dim:
        raise ValueError(f"{STATE} has {state.shape[-1]} dims; the config says {cfg.state_dim}")
    state = normalizer.normalize(STATE, state)
    images = [image(obs[IMAGE_PREFIX + cam].to(device).float()) for cam in cfg.cameras]
    masks = [torch.ones(img.shape[0], dtype=torch.bool, device=device) for img in images]
    tokens, token_mask = _tokenize(tokenizer, prompts(list(obs[TASK]), state), cfg, device)
    return FlowInputs(images, masks, tokens, token_mask, pad_vector(state, cfg.max_state_dim))


def _tokenize(
    tokenizer: Any, texts: list[str], cfg: LeRobotAdapterConfig, device: torch.device
) -> tuple[Tensor, Tensor]:  # [B, L] ids, [B, L] bool
    enc = tokenizer(
        texts,
        max_length=cfg.tokenizer_max_length,
        truncation=True,
        padding=cfg.pad_language_to,
        padding_side="right",
        return_tensors="pt",
    )
    return enc["input_ids"].to(device), enc["attention_mask"].to(device, torch.bool)


def flow_actions(
    batch: Batch, cfg: LeRobotAdapterConfig, normalizer: Normalizer, device: torch.device
) -> Tensor:  # [B, H, A_max]
    """The batch's action chunk [B, H, A] in raw units, normalised and zero-padded to ``max_action_dim``."""
    target = batch[ACTION].to(device).float()
    if tuple(target.shape[1:]) != (cfg.chunk_size, cfg.action_dim):
        raise ValueError(f"{ACTION} {tuple(target.shape)}: expected [B, {cfg.chunk_size}, {cfg.action_dim}]")
    return pad_vector(normalizer.normalize(ACTION, target), cfg.max_action_dim)


def flow_noise(
    noise: Tensor | None,
    b: int,
    cfg: LeRobotAdapterConfig,
    generator: torch.Generator | None,
    device: torch.device,
) -> Tensor:  # [B, H, A_max]
    """eps as the network takes it: ``noise`` [B, H, max_action_dim] as given, [B, H, A] zero-padded, or None:
    N(0, I) of the full width drawn from ``generator``."""
    shape = (b, cfg.chunk_size, cfg.max_action_dim)
    if noise is None:
        return draw(torch.randn, shape, generator).to(device)
    noise = noise.to(device).float()
    if tuple(noise.shape) == (b, cfg.chunk_size, cfg.action_dim):
        return pad_vector(noise, cfg.max_action_dim)
    if tuple(noise.shape) != shape:
        raise ValueError(
            f"noise {tuple(noise.shape)}: expected [B, H, A] or [B, H, max_action_dim] = {shape}"
        )
    return noise
