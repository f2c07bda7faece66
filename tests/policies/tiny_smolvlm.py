"""Test helpers for the SmolVLA adapter: raw batches. The tiny offline backbone and the tiny LeRobot SmolVLA
folder are built by ``policies/smolvla/tiny.py`` (benchmarks and scripts use them too)."""

from __future__ import annotations

from typing import Any

import torch

from policies.smolvla.tiny import (
    TINY_TASKS,
    build_tiny_smolvlm,
    make_tiny_smolvla,
    save_lerobot_smolvla,
)

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
