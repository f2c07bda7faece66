"""Flow-matching math shared by every flow policy."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from vla.sharding import draw


def sample_beta(n: int, a: float, b: float, generator: torch.Generator | None = None) -> Tensor:
    """s ~ Beta(a, b), [n]. With a generator (reproducible), Beta(a, 1) and Beta(1, b) are drawn by
    inverting their CDFs (s = u^(1/a), s = 1 - u^(1/b)), per row of the global batch
    (:func:`vla.sharding.draw`); other shapes use torch's global RNG."""
    if generator is not None and b == 1.0:
        return draw(torch.rand, (n,), generator) ** (1.0 / a)
    if generator is not None and a == 1.0:
        return 1.0 - draw(torch.rand, (n,), generator) ** (1.0 / b)
    return torch.distributions.Beta(a, b).sample((n,))


# ---- real-time chunking (RTC): guided inpainting of the committed prefix --------------------------------
def rtc_prefix_weights(chunk_size: int, delay: int, horizon: int, schedule: str = "exp") -> Tensor:
    """W [H]: 1 over the first ``delay`` actions (executed while this chunk is computed), decaying to 0
    at ``horizon`` (the end of the previous chunk's committed actions), 0 after it.

    ``exp`` (Black et al. 2025): c_i = (horizon - i) / (horizon - delay + 1), W_i = c_i (e^c_i - 1)/(e - 1);
    ``linear``: W_i = c_i.
    """
    if schedule not in ("exp", "linear"):
        raise ValueError(f"rtc schedule={schedule!r}: use 'exp' or 'linear'")
    horizon = max(0, min(horizon, chunk_size))
    delay = max(0, min(delay, horizon))
    i = torch.arange(chunk_size, dtype=torch.float32)
    c = ((horizon - i) / max(1, horizon - delay + 1)).clamp(0.0, 1.0)
    w = c * (torch.exp(c) - 1) / (torch.e - 1) if schedule == "exp" else c
    w = torch.where(i < delay, torch.ones_like(w), w)
    return torch.where(i >= horizon, torch.zeros_like(w), w)


def rtc_guided_velocity(
    velocity: Callable[[Tensor], Tensor],
    x: Tensor,
    tau: float,
    target: Tensor,
    weights: Tensor,
    beta_max: float,
) -> Tensor:
    """One RTC denoising step (t = 1 is data):

        x1_hat = x + (1 - t) v(x),  e = W * (Y - x1_hat),  g = e^T d x1_hat / d x  (a VJP),
        v <- v + min(beta_max, (1 - t) / (t r2)) g,  r2 = (1 - t)^2 / (t^2 + (1 - t)^2).

    x, target [B, H, A] (target = the previous chunk's committed actions, zero-padded); weights [H].
    """
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        v = velocity(x)
        x1_hat = x + (1.0 - tau) * v
        err = weights.to(x.device)[None, :, None] * (target - x1_hat)
        (g,) = torch.autograd.grad(x1_hat, x, grad_outputs=err)
    if tau <= 0.0:
        w = beta_max
    else:
        r2 = (1.0 - tau) ** 2 / (tau**2 + (1.0 - tau) ** 2)
        w = min(beta_max, (1.0 - tau) / (tau * r2)) if r2 > 0 else beta_max
    return (v + w * g).detach()
