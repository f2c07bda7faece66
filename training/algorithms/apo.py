"""APO: action preference optimisation from human interventions (Xia et al., "Human-assisted Robotic Policy
Refinement via Action Preference Optimization", NeurIPS 2025), for a flow-matching policy."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import Tensor

from training.algorithms.base import ALGORITHMS, AlgoConfig, GradientAlgorithm, require_labels
from training.algorithms.credit import LABELS_FILE
from training.algorithms.preference import REFERENCE_DIR, FrozenReference, shared_noise, with_actions
from training.distributed import global_mean, global_sum, weighted_mean
from vla.batch import ACTION, ACTION_IS_PAD, Batch

DESIRABLE, UNUSED, UNDESIRABLE = 1, 0, -1
LABELS_DIR = "preference"  # <out>/preference/labels.safetensors: each frame's label and draw weight


@dataclass
class APOConfig(AlgoConfig):
    beta: float = 0.1  # [paper] KTO's temperature on the implicit reward r = log pi - log pi_ref
    z0_clamp: float = 5.0  # [paper] the reference point z0 is clamped to [-z0_clamp, z0_clamp]
    undesirable_frames: int = 5  # [paper] K policy frames before a takeover (each one: ours) are undesirable
    bc_weight: float = 1.0  # [paper's public code, bc_weight] L_FM on the desirable samples, added
    adaptive: bool = True  # [paper] adaptive reweighting by the policy's action error
    error_steps: int | None = None  # Euler steps of the policy's action for that error (None: its K)
    # [ours] "all": every demonstration is desirable (the spec); "success": only successful ones (for
    # datasets that hold failed demonstrations, which the spec's labels would teach as desirable)
    demos: str = "all"

    def __post_init__(self) -> None:
        if self.beta <= 0 or self.z0_clamp <= 0 or self.undesirable_frames < 1 or self.bc_weight < 0:
            raise ValueError(
                f"apo: beta={self.beta}, z0_clamp={self.z0_clamp} must be > 0, undesirable_frames="
                f"{self.undesirable_frames} >= 1, bc_weight={self.bc_weight} >= 0"
            )
        if self.demos not in ("all", "success"):
            raise ValueError(f"apo: demos={self.demos!r}: use 'all' or 'success'")


def preference_labels(data: Any, k: int, demos: str = "all") -> Tensor:  # [N] int8
    """Per-frame labels: -1 for the ``k`` policy frames before each human takeover of an episode; +1 for
    human frames, demonstrations (episodes whose ``source`` is not ``policy``; with ``demos="success"``
    successful ones only) and the other policy frames after the first takeover; 0 (unused) for the rest.

    The paper (and METHODS.md) labels the lead-in of the first takeover; [ours] every takeover's lead-in, as
    the first's: after a handback, the policy frames before a second takeover are the same kind of error.
    A human frame inside a lead-in (two takeovers fewer than ``k`` frames apart) stays desirable."""
    labels = torch.zeros(len(data), dtype=torch.int8)
    for e, meta in enumerate(data.episodes):
        sl = data.episode_frames(e)
        human = data.is_intervention[sl]
        if meta.source != "policy":
            labels[sl] = DESIRABLE if (demos == "all" or meta.success) else UNUSED
            continue
        if not bool(human.any()):
            continue
        first = int(human.int().argmax())
        labels[sl.start + first : sl.stop] = DESIRABLE
        onsets = human & ~torch.cat([human.new_zeros(1), human[:-1]])  # the first frame of each takeover
        lead_in = torch.zeros_like(human)
        for t in onsets.nonzero().flatten().tolist():
            lead_in[max(0, t - k) : t] = True
        labels[sl][lead_in & ~human] = UNDESIRABLE
    return labels


def balanced_weights(labels: Tensor) -> Tensor:  # [N]
    """Sampling weights that draw desirable and undesirable frames equally often, unused ones never."""
    w = torch.zeros(len(labels))
    for value in (DESIRABLE, UNDESIRABLE):
        mask = labels == value
        w[mask] = 0.5 / mask.sum()
    return w


def adaptive_weights(error: Tensor, desirable: Tensor) -> Tensor:  # [B]
    """APO's adaptive reweighting: w_i = (e_i + 1e-4) / (sum_group e + 1e-4) within each group; desirable
    weight 1 - exp(-w_i), undesirable exp(-w_i); [ours] each group then rescaled to mean 1, so that the
    balanced groups weigh alike and only the within-group emphasis remains."""
    out = torch.zeros_like(error)
    for group, fn in ((desirable, lambda w: 1 - torch.exp(-w)), (~desirable, lambda w: torch.exp(-w))):
        # sums and means over the global batch's group (training.distributed; every rank calls them)
        v = fn((error + 1e-4) / (global_sum((error * group).sum()) + 1e-4))
        out = torch.where(group, v / global_mean(v, group).clamp(min=1e-12), out)
    return out


@ALGORITHMS.register("apo")
class APO(GradientAlgorithm):
    """KTO on interventions with a flow policy (log pi by the flow surrogate of ``preference.py``):

        r = log pi_theta(A | o) - log pi_ref(A | o),
        z0 = clamp(mean_i r(o_i, A_{i+1}), -5, 5)   (mismatched pairs: each o with another sample's chunk),
        L = E_desirable [ w (1 - sigmoid(beta (r - z0))) ] + E_undesirable [ w (1 - sigmoid(beta (z0 - r))) ]
            + bc_weight E_desirable [ L_FM ],

    with w APO's adaptive weights from the L1 error of the policy's action (``adaptive_weights``), batches
    balanced between the two labels (``preference_labels``).
    """

    resume_dirs = (REFERENCE_DIR,)  # the frozen starting policy
    config_class = APOConfig
    config: APOConfig

    @classmethod
    def label_needs(cls, config: dict[str, Any]) -> tuple[bool, bool]:
        return config.get("demos", "all") == "success", True

    def prepare(self, data: Any, out: Any, progress: bool = True) -> dict[str, float]:
        cfg = self.config
        require_labels(data, "apo", interventions=True, success=cfg.demos == "success")
        labels = preference_labels(data, cfg.undesirable_frames, cfg.demos)
        counts = {name: int((labels == v).sum()) for name, v in (("desirable", 1), ("undesirable", -1))}
        if not all(counts.values()):
            raise ValueError(
                f"apo: {counts['desirable']} desirable and {counts['undesirable']} undesirable frames in "
                f"{list(data.cfg.roots)}: APO needs policy episodes with a human takeover "
                "(complementary_info.is_intervention) besides demonstrations"
            )
        data.labels["preference"] = labels
        data.sampling_weights = balanced_weights(labels)
        folder = Path(out) / LABELS_DIR  # for plots and diagnoses, beside the run: never in the dataset
        folder.mkdir(parents=True, exist_ok=True)
        draws = data.sampling_weights * len(labels)  # how often each frame is drawn, relative to uniform
        save_file({"preference": labels, "weight": draws}, str(folder / LABELS_FILE))
        self.reference = FrozenReference(self.policy, Path(out))
        return {**{k: float(v) for k, v in counts.items()}, "unused": float((labels == 0).sum())}

    def action_error(self, batch: Batch) -> Tensor:  # [B]
        """Mean |A_hat - A| over valid steps, A_hat the policy's sampled chunk (no gradient)."""
        was_training = self.policy.training
        self.policy.eval()
        with torch.no_grad():
            steps = self.config.error_steps
            chunk = self.policy.sample_chunk(batch, num_steps=steps, generator=self.generator)
        self.policy.train(was_training)
        err = (chunk.cpu() - batch[ACTION].cpu()).abs().mean(-1)  # [B, H]
        valid = ~batch[ACTION_IS_PAD].cpu()
        return (err * valid).sum(-1) / valid.sum(-1).clamp(min=1)

    def update(self, batch: Batch) -> dict[str, float]:
        cfg = self.config
        desirable = batch["preference"].cpu() > 0  # [B]
        noise, time = shared_noise(self.policy, len(desirable), self.generator)
        r, fm = self.reference.log_ratio(self.policy, batch, noise, time)  # [B] each
        with torch.no_grad():  # the reference point: the same pairs with each other's chunks
            mismatched = with_actions(batch, batch[ACTION].roll(1, 0), batch[ACTION_IS_PAD].roll(1, 0))
            z0 = global_mean(self.reference.log_ratio(self.policy, mismatched, noise, time)[0])
            z0 = z0.clamp(-cfg.z0_clamp, cfg.z0_clamp)
        d = desirable.to(r.device)
        kto = torch.where(d, 1 - torch.sigmoid(cfg.beta * (r - z0)), 1 - torch.sigmoid(cfg.beta * (z0 - r)))
        w = adaptive_weights(self.action_error(batch), desirable) if cfg.adaptive else torch.ones(len(d))
        bc = weighted_mean(fm, d.to(fm.dtype))  # over the global batch's desirable frames
        metrics = self.step((w.to(kto.device) * kto).mean() + cfg.bc_weight * bc)
        r = r.detach()
        metrics.update(
            reward_desirable=float(r[d].mean()) if d.any() else 0.0,
            reward_undesirable=float(r[~d].mean()) if (~d).any() else 0.0,
            z0=float(z0),
        )
        return metrics
