"""Supervised fine-tuning (behaviour cloning) of a flow-matching policy: the control for post-training, and
(``indicator=success``) the base RECAP post-trains, with the advantage indicator already present."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from training.algorithms.base import ALGORITHMS, AlgoConfig, GradientAlgorithm, require_labels
from vla.batch import Batch

INDICATORS = ("none", "success")


@dataclass
class SFTConfig(AlgoConfig):
    # what conditions each frame: "none" (plain BC), or "success": I = the episode's outcome (1 for the frames
    # of successful episodes, 0 for failed ones), dropped to "none" with probability ``policy.cond_dropout``.
    # pi*0.6's RECAP starts from a base trained with the indicator present, so post-training does not learn
    # the indicator embedding from zero (ours without it needs ``optim.indicator_lr_scale: 30``)
    indicator: str = "none"

    def __post_init__(self) -> None:
        if self.indicator not in INDICATORS:
            raise ValueError(f"algo.indicator={self.indicator!r}: use one of {', '.join(INDICATORS)}")


@ALGORITHMS.register("sft")
class SFT(GradientAlgorithm):
    """Behaviour cloning with the flow-matching loss (pi0, Black et al. 2024):

    L(theta) = E_{(o, A) ~ D, tau, eps} || v_theta(tau A + (1 - tau) eps, tau, o) - (A - eps) ||^2

    With ``indicator=success``, L(theta) = E_{(o, A, I)} [ L_FM(theta; o, A | I) ] with I = the episode's
    success (pi*0.6's base, its indicator dropped as RECAP drops it). The base still deploys unconditioned
    (``inference_cond`` stays null); RECAP post-training sets I = 1.
    """

    config_class = SFTConfig

    @classmethod
    def label_needs(cls, config: dict[str, Any]) -> tuple[bool, bool]:
        return config.get("indicator", "none") == "success", False

    def prepare(self, data: Any, out: Any, progress: bool = True) -> dict[str, float]:
        if self.config.indicator == "none":  # type: ignore[attr-defined]
            return {}
        require_labels(data, "sft algo.indicator=success", success=True)  # one line, as vla-train does
        success = torch.tensor([bool(m.success) for m in data.episodes], dtype=torch.long)  # [E]
        data.labels["cond"] = success[data.episode_id]  # [N]
        return {"positive_fraction": float(data.labels["cond"].float().mean())}

    def update(self, batch: Batch) -> dict[str, float]:
        cond = batch["cond"] if self.config.indicator == "success" else None  # type: ignore[attr-defined]  # [B]
        per_sample = self.policy.loss(batch, cond=cond, generator=self.generator)  # [B]
        return self.step(per_sample.mean())
