"""Per-row random draws that do not depend on how a batch is split across data-parallel processes.

Under data-parallel training (:mod:`training.distributed`) every process draws the *global* batch from the
same generator and keeps rows ``rank, rank + size, ...`` of it. The per-row randomness of a loss (the
flow-matching noise and time, the indicator's dropout) is drawn the same way through :func:`draw`: for the
global batch, from the same generator, and sliced to this process's rows. So N processes compute exactly the
per-row terms one process computes for the global batch, and a run resumes at another world size on the same
draws. Outside :func:`rows_of` (one process) :func:`draw` is the plain draw.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor

_ROWS: contextvars.ContextVar[tuple[int, int]] = contextvars.ContextVar("vla_rows", default=(0, 1))


@contextmanager
def rows_of(rank: int, size: int) -> Iterator[None]:
    """Inside the block, batches hold rows ``rank::size`` of the global batch."""
    if not 0 <= rank < size:
        raise ValueError(f"rank {rank} of world size {size}")
    token = _ROWS.set((rank, size))
    try:
        yield
    finally:
        _ROWS.reset(token)


def shard() -> tuple[int, int]:
    """(rank, world size) of the rows a batch holds here; (0, 1) outside :func:`rows_of`."""
    return _ROWS.get()


def draw(fn: Callable[..., Tensor], shape: Sequence[int], generator: torch.Generator | None = None) -> Tensor:
    """``fn(shape, generator=generator)`` (``torch.randn``, ``torch.rand``) for this process's rows:
    ``shape[0]`` is the local row count; the draw is made for the global batch and sliced."""
    rank, size = _ROWS.get()
    if size == 1:
        return fn(tuple(shape), generator=generator)
    full = fn((shape[0] * size, *shape[1:]), generator=generator)
    return full[rank::size]
