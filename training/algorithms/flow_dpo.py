"""Flow-DPO: preference post-training of a flow-matching policy on pairs of its own chunks (NORA-1.5-style
pairs; the Diffusion-DPO loss of Wallace et al. 2024 in the flow-matching form)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch.nn.functional as F
from torch import Tensor

from training.algorithms.base import ALGORITHMS
from training.algorithms.credit import CreditAlgorithm, CreditConfig
from training.algorithms.preference import REFERENCE_DIR, FrozenReference, shared_noise, with_actions
from vla.batch import Batch


@dataclass
class FlowDPOConfig(CreditConfig):
    beta: float = 0.1  # on the summed squared velocity errors (preference.py), Diffusion-DPO's scale
    proximal: float = 1.0  # lambda of lambda L_FM(chosen): plain Flow-DPO is reported to reward-hack

    def __post_init__(self) -> None:
        if self.beta <= 0 or self.proximal < 0:
            raise ValueError(f"flow_dpo: beta={self.beta} must be > 0 and proximal={self.proximal} >= 0")


@ALGORITHMS.register("flow_dpo")
class FlowDPO(CreditAlgorithm):
    """Diffusion-DPO on chosen / rejected chunks A_w, A_l, with one tau and eps shared across the pair:

        D_x = ||v_theta(x_tau, tau, o) - u_x||^2 - ||v_ref(x_tau, tau, o) - u_x||^2,   x in {w, l},
        L = -log sigmoid(-beta (D_w - D_l)) + lambda L_FM(theta; o, A_w).

    Pairs: M (5) chunks of the starting policy per frame, scored by a chunk Q ensemble fitted on the
    episodes (ALOE's critic, ``critic.pairs``): chosen = the best, rejected = the worst. pi_ref is the
    starting policy, frozen (``FrozenReference``).
    """

    resume_dirs = (REFERENCE_DIR,)  # the frozen starting policy
    config_class = FlowDPOConfig
    critic_name = "chunk_q"
    # the critic scores pairs; never ALOE's online weights
    critic_overrides: ClassVar[dict[str, Any]] = {"pairs": True, "online": False}
    label_keys = ("chosen", "rejected")
    config: FlowDPOConfig

    def prepare(self, data: Any, out: Any, progress: bool = True) -> dict[str, float]:
        summary = super().prepare(data, out, progress)
        h, want = data.labels["chosen"].shape[1], self.policy.chunk_size
        if h != want:
            raise ValueError(f"flow_dpo: critic.chunk={h} must be 0 or the policy's chunk size {want}")
        self.reference = FrozenReference(self.policy, Path(out))
        return summary

    def describe(self, labels: dict[str, Tensor]) -> dict[str, float]:
        """The pairs' Q gap (best minus worst of the M chunks), not the critic's ALOE weights."""
        gap = labels["pair_gap"]
        return {"pair_gap_mean": float(gap.mean()), "pair_gap_q90": float(gap.quantile(0.9))}

    def update(self, batch: Batch) -> dict[str, float]:
        chosen, rejected = with_actions(batch, batch["chosen"]), with_actions(batch, batch["rejected"])
        noise, time = shared_noise(self.policy, len(batch["chosen"]), self.generator)
        r_w, fm_w = self.reference.log_ratio(self.policy, chosen, noise, time)  # r = -D
        r_l, _ = self.reference.log_ratio(self.policy, rejected, noise, time)
        margin = r_w - r_l  # = -(D_w - D_l)  [B]
        loss = -F.logsigmoid(self.config.beta * margin).mean() + self.config.proximal * fm_w.mean()
        metrics = self.step(loss)
        margin = margin.detach()
        metrics.update(margin=float(margin.mean()), accuracy=float((margin > 0).float().mean()))
        return metrics
