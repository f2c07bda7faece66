"""Flow-matching math shared by every flow policy."""

from __future__ import annotations

import torch
from torch import Tensor


def sample_beta(n: int, a: float, b: float, generator: torch.Generator | None = None) -> Tensor:
    """s ~ Beta(a, b), [n]. With a generator (reproducible), Beta(a, 1) and Beta(1, b) are drawn by
    inverting their CDFs (s = u^(1/a), s = 1 - u^(1/b)); other shapes use torch's global RNG."""
    if generator is not None and b == 1.0:
        return torch.rand(n, generator=generator) ** (1.0 / a)
    if generator is not None and a == 1.0:
        return 1.0 - torch.rand(n, generator=generator) ** (1.0 / b)
    return torch.distributions.Beta(a, b).sample((n,))
