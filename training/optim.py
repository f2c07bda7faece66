"""The one optimiser step of the training stack, for policies (``GradientAlgorithm.step``) and critics
(``Critic.fit``, ALOE's online critic): zero_grad, backward, the gradients averaged over data-parallel
ranks (:mod:`training.distributed`; nothing for one process), clip, a non-finite check, step."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

from training.distributed import all_agree, average_gradients
from vla.errors import NonFiniteError


def optimizer_step(
    loss: Tensor,
    params: Iterable[Tensor],
    optimizer: torch.optim.Optimizer,
    clip: float,
    *,
    what: str = "",
    fix: str = "",
) -> float:
    """One step of ``optimizer`` on the scalar ``loss``, gradients clipped to norm ``clip``; returns the
    gradient norm before clipping.

    Args:
        what: What is being trained, the start of an error's message (e.g. ``"critic habc: step 3"``).
        fix: What to do, the end of an error's message.

    Raises:
        NonFiniteError: The loss (before ``backward``) or the gradient norm (before the step) is NaN/inf,
            e.g. ``critic habc: step 3: the loss is nan; <fix>``; no weight or optimiser moment has moved.
    """

    def refuse(problem: str) -> NonFiniteError:
        return NonFiniteError(": ".join(p for p in (what, problem) if p) + (f"; {fix}" if fix else ""))

    params = list(params)
    finite = bool(torch.isfinite(loss.detach()).all())
    if not all_agree(finite):  # every rank stops at the same step, none waits for the others
        raise refuse(
            f"the loss is {float(loss.detach())}" if not finite else "another rank's loss is not finite"
        )
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    average_gradients(params)  # data-parallel ranks: the global batch's gradient
    norm = _clip(params, clip)
    if not bool(torch.isfinite(norm)):
        optimizer.zero_grad(set_to_none=True)
        raise refuse(f"the gradient norm is {float(norm)} (loss {float(loss.detach()):.4g})")
    optimizer.step()
    return float(norm)


def _clip(params: list[Tensor], clip: float) -> Tensor:
    """Scale the gradients to norm at most ``clip``; returns the norm before. FSDP-sharded gradients
    (DTensors) count whole: their norm is gathered over the shards, and each shard is scaled in place."""
    grads = [p.grad for p in params if p.grad is not None]
    if not any(hasattr(g, "full_tensor") for g in grads):
        return torch.nn.utils.clip_grad_norm_(params, clip)
    norms = [torch.linalg.vector_norm(g) for g in grads]
    squares = sum((n.full_tensor() if hasattr(n, "full_tensor") else n) ** 2 for n in norms)
    norm = torch.as_tensor(squares).sqrt()
    coef = min(1.0, clip / (float(norm) + 1e-6))
    if coef < 1.0:
        for g in grads:
            g.mul_(coef)
    return norm
