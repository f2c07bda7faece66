"""Test helpers for the SmolVLA adapter: a tiny offline backbone, raw batches, a tiny LeRobot SmolVLA folder.

The backbone builder itself lives in ``policies/smolvla/tiny.py`` (benchmarks use it too); this module adds
what only tests need.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from policies.smolvla.tiny import TINY_TASKS, build_tiny_smolvlm, make_tiny_smolvla, tiny_stats

__all__ = ["TINY_TASKS", "build_tiny_smolvlm", "make_batch", "make_tiny_smolvla", "save_lerobot_smolvla"]


def make_batch(
    b: int = 2,
    *,
    chunk_size: int = 8,
    action_dim: int = 4,
    state_dim: int = 6,
    cameras: tuple[str, ...] = ("front",),
    image_hw: tuple[int, int] = (48, 64),
    seed: int = 0,
) -> dict[str, Any]:
    """A raw-unit training batch (``vla.batch`` keys); images not square, so resize-with-pad is exercised."""
    g = torch.Generator().manual_seed(seed)
    batch: dict[str, Any] = {
        f"observation.images.{c}": torch.rand(b, 3, *image_hw, generator=g) for c in cameras
    }
    batch["observation.state"] = torch.randn(b, state_dim, generator=g)
    batch["task"] = [TINY_TASKS[i % len(TINY_TASKS)] for i in range(b)]
    batch["action"] = torch.randn(b, chunk_size, action_dim, generator=g)
    batch["action_is_pad"] = torch.zeros(b, chunk_size, dtype=torch.bool)
    return batch


def save_lerobot_smolvla(
    folder: Path,
    backbone: Path,
    *,
    chunk_size: int = 8,
    action_dim: int = 4,
    state_dim: int = 6,
    max_action_dim: int = 6,
    max_state_dim: int = 8,
    image_size: int = 32,
) -> tuple[Any, Any, Any]:
    """Writes a tiny LeRobot SmolVLA folder as LeRobot does (policy + pre/post-processors with stats).

    Padded state/action widths (``max_*_dim`` > the real ones) exercise the adapter's padding.
    Returns ``(policy, preprocessor, postprocessor)``.
    """
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy
    from lerobot.policies.smolvla.processor_smolvla import make_smolvla_pre_post_processors

    cfg = SmolVLAConfig(
        vlm_model_name=str(backbone),
        input_features={
            "observation.images.front": PolicyFeature(
                type=FeatureType.VISUAL, shape=(3, image_size, image_size)
            ),
            "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(state_dim,)),
        },
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(action_dim,))},
        chunk_size=chunk_size,
        n_action_steps=chunk_size,
        max_state_dim=max_state_dim,
        max_action_dim=max_action_dim,
        resize_imgs_with_padding=(image_size, image_size),
        num_vlm_layers=2,
        num_steps=4,
        tokenizer_max_length=24,
        device="cpu",
    )
    policy = SmolVLAPolicy(cfg)
    stats = {
        k: {s: torch.as_tensor(v, dtype=torch.float32) for s, v in d.items()}
        for k, d in tiny_stats(state_dim, action_dim).items()
    }
    pre, post = make_smolvla_pre_post_processors(cfg, stats)
    policy.save_pretrained(folder)
    pre.save_pretrained(folder)
    post.save_pretrained(folder)
    return policy, pre, post
