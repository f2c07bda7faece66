"""Supervised fine-tuning (behaviour cloning) of a flow-matching policy: the control for post-training."""

from __future__ import annotations

from training.algorithms.base import ALGORITHMS, GradientAlgorithm
from vla.batch import Batch


@ALGORITHMS.register("sft")
class SFT(GradientAlgorithm):
    """Behaviour cloning with the flow-matching loss (pi0, Black et al. 2024):

    L(theta) = E_{(o, A) ~ D, tau, eps} || v_theta(tau A + (1 - tau) eps, tau, o) - (A - eps) ||^2
    """

    def update(self, batch: Batch) -> dict[str, float]:
        per_sample = self.policy.loss(batch, generator=self.generator)  # [B]
        return self.step(per_sample.mean())
