"""What the preference methods (APO, Flow-DPO) share: a frozen reference policy and the flow-matching
surrogate of the log-likelihood ratio between the policy and it.

A flow policy has no tractable log pi(A | o); as in Diffusion-DPO, the squared velocity error on one
noised sample stands in for -log pi (up to constants), with the same flow time tau and noise eps for the
policy and the reference:

    log pi_theta(A | o) - log pi_ref(A | o)
        ~  -( ||v_theta(x_tau, tau, o) - u||^2 - ||v_ref(x_tau, tau, o) - u||^2 )

with x_tau = tau A + (1 - tau) eps, u = A - eps, the squared norm summed over the chunk's valid steps and
action dims (``policy.loss`` is their mean, so the sum is the mean times their count).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from vla.batch import ACTION, ACTION_IS_PAD, Batch
from vla.checkpoint import publish, staging_dir
from vla.policy import load_policy
from vla.sharding import draw

REFERENCE_DIR = "reference"


def chunk_elements(batch: Batch) -> Tensor:  # [B]
    """The number of valid chunk entries (steps that are not padding x action dims) of each sample."""
    b, h, a = batch[ACTION].shape
    if ACTION_IS_PAD not in batch:
        return torch.full((b,), float(h * a))
    return (~batch[ACTION_IS_PAD]).sum(-1).float().cpu() * a


def with_actions(batch: Batch, actions: Tensor, pad: Tensor | None = None) -> Batch:
    """``batch``'s observations with other action chunks [B, H, A] (raw units); ``pad`` [B, H] or none."""
    out = dict(batch)
    out[ACTION] = actions
    out[ACTION_IS_PAD] = torch.zeros(actions.shape[:2], dtype=torch.bool) if pad is None else pad
    return out


def shared_noise(policy: nn.Module, b: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """One (eps [B, H, A], tau [B]) draw, to be shared by the policy and the reference."""
    noise = draw(torch.randn, (b, policy.chunk_size, policy.action_dim), generator)
    return noise, policy.sample_time(b, generator).cpu()


class FrozenReference:
    """pi_ref: the policy as post-training starts, frozen. Saved once under ``<out>/reference`` so that a
    resumed run compares against the same weights (the resumed policy is not the starting one)."""

    def __init__(self, policy: nn.Module, out: str | Path) -> None:
        folder = Path(out) / REFERENCE_DIR
        if not folder.is_dir():
            tmp = staging_dir(folder)
            policy.save(tmp)
            publish(tmp, folder)
        device = next(policy.parameters()).device
        self.model = load_policy(folder, device).requires_grad_(False).eval()
        self.folder = folder

    def log_ratio(
        self, policy: nn.Module, batch: Batch, noise: Tensor, time: Tensor
    ) -> tuple[Tensor, Tensor]:
        """(r, L_theta) [B] each: r = log pi_theta - log pi_ref by the flow surrogate (module docstring),
        with gradient through the policy; L_theta is the policy's per-sample flow-matching loss."""
        ours = policy.loss(batch, noise=noise, time=time)  # [B]
        with torch.no_grad():
            ref = self.model.loss(batch, noise=noise, time=time)  # [B]
        n = chunk_elements(batch).to(ours.device)
        return -n * (ours - ref), ours
