"""The ``Policy`` protocol every policy implements (our flow-matching VLA, LeRobot adapters), its registry,
and :func:`load_policy`. Implementations register themselves in ``policies/``: import ``policies`` before
calling :func:`load_policy`."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from vla.batch import Batch
from vla.registry import Registry


@runtime_checkable
class Policy(Protocol):
    """A chunking policy: per-sample training loss and noise-injectable chunk sampling.

    ``cond`` is the advantage indicator (long [B] in {0, 1}, or None = unconditioned / dropped);
    ``guidance`` is the classifier-free guidance scale beta (None = no CFG).
    """

    chunk_size: int  # H
    action_dim: int  # A

    def loss(
        self,
        batch: Batch,
        *,
        noise: Tensor | None = None,
        time: Tensor | None = None,
        cond: Tensor | None = None,
    ) -> Tensor:  # [B]
        ...

    def sample_chunk(
        self,
        obs: Batch,
        *,
        cond: Tensor | None = None,
        noise: Tensor | None = None,
        num_steps: int | None = None,
        guidance: float | None = None,
        prefix: Tensor | None = None,
        prefix_delay: int = 0,
        generator: torch.Generator | None = None,
        num_samples: int = 1,
    ) -> Tensor:
        """A chunk of actions in raw units: [B, H, A]. ``prefix`` [B, P, A]: the previous chunk's committed
        actions to inpaint (real-time chunking), the first ``prefix_delay`` of them frozen.
        ``num_samples`` = m > 1: m chunks per observation, in a row: [B * m, H, A] (``noise`` [B * m, H, A];
        ``cond`` and ``prefix`` per observation), as if each observation were repeated m times."""
        ...

    def save(self, directory: str | Path) -> None: ...


POLICIES: Registry = Registry("policy")


def import_policy_modules(names: Sequence[str]) -> None:
    """Import the modules that register policies (``policies``, or a test's own module).

    Raises:
        InputError: A module cannot be imported (one line naming it).
    """
    from vla.errors import InputError

    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise InputError(f"imports: cannot import {name!r} ({exc}); fix imports=[...]") from exc


def load_policy(directory: str | Path, device: str | torch.device = "cpu") -> Policy:
    """Load any registered policy from a checkpoint folder (its ``config.yaml`` names the type)."""
    from vla.checkpoint import read_config

    cfg = read_config(directory)
    if "type" not in cfg:
        raise KeyError(f"{Path(directory) / 'config.yaml'}: no 'type' field naming the policy")
    cls = POLICIES.get(cfg["type"])
    return cls.load(directory, device=device)
