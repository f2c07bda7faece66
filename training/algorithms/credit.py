"""Post-training from credit: a critic fitted on the episodes labels every frame, then the policy trains
on the labels. RECAP (indicator conditioning), ALOE, HABC and AWBC (advantage weights)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from safetensors.torch import load_file, save_file

from training.algorithms.base import ALGORITHMS, AlgoConfig, GradientAlgorithm
from training.critics import CRITICS
from vla.batch import Batch

LABELS_FILE = "labels.safetensors"
SUMMARY_FILE = "summary.json"


@dataclass
class CreditConfig(AlgoConfig):
    critic: dict[str, Any] = field(default_factory=dict)  # fields of the critic's config
    guidance: float | None = None  # RECAP / ALOE indicator mode: CFG scale beta, the checkpoint's default


class CreditAlgorithm(GradientAlgorithm):
    """Fits ``critic_name`` in :meth:`prepare` (or reloads its labels on resume) and stores them in
    ``<out>/critic/`` beside the critic's weights: derived columns, never written into the dataset."""

    config_class = CreditConfig
    critic_name: ClassVar[str] = ""
    label_keys: ClassVar[tuple[str, ...]] = ()

    def prepare(self, data: Any, out: Any, progress: bool = True) -> dict[str, float]:
        folder = Path(out) / "critic"
        if (folder / LABELS_FILE).is_file():  # resume: the labels of the critic fitted at the start
            labels = load_file(str(folder / LABELS_FILE))
            if len(next(iter(labels.values()))) != len(data):
                raise ValueError(f"{folder / LABELS_FILE} labels another dataset ({len(data)} frames now)")
            summary = json.loads((folder / SUMMARY_FILE).read_text())
        else:
            cls = CRITICS.get(self.critic_name)
            critic = cls(cls.config_class(**self.config.critic), data, self.policy, progress)  # type: ignore[attr-defined]
            history = critic.fit()
            labels = critic.label()
            k = max(1, len(history) // 10)
            summary = {
                "critic_loss_start": float(sum(history[:k]) / k),
                "critic_loss_end": float(sum(history[-k:]) / k),
                **self.describe(labels),
            }
            critic.save(
                folder, extra={"frames": len(data), "cameras": list(data.cameras), "chunk_size": data.H}
            )
            if critic.cfg.encoder == "policy":  # the features it reads: the policy before post-training
                self.policy.save(folder / "policy")
            save_file({k: v.contiguous() for k, v in labels.items()}, str(folder / LABELS_FILE))
            (folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=2))
        missing = [k for k in self.needed_labels() if k not in labels]
        if missing:
            raise KeyError(f"critic {self.critic_name} did not label {missing}")
        for key in self.needed_labels():
            data.labels[key] = labels[key]
        return summary

    def needed_labels(self) -> tuple[str, ...]:
        return self.label_keys

    def describe(self, labels: dict[str, torch.Tensor]) -> dict[str, float]:
        out = {}
        if "cond" in labels:
            out["positive_fraction"] = float(labels["cond"].float().mean())
        if "weight" in labels:
            w = labels["weight"]
            out.update(weight_min=float(w.min()), weight_max=float(w.max()), weight_mean=float(w.mean()))
        return out


@ALGORITHMS.register("recap")
class RECAP(CreditAlgorithm):
    """Advantage-conditioned BC (pi*0.6):

        L(theta) = E_{(o, A, I)} [ L_FM(theta; o, A | I) ],   I_t = 1[A_t > eps_task] (1 on human frames),

    with I replaced by "none" with probability ``policy.cond_dropout`` (0.3, classifier-free guidance
    training). The post-trained checkpoint conditions on I = 1 at inference (``inference_cond``), with
    CFG v = v_u + beta (v_pos - v_u) when ``guidance`` = beta is set.
    """

    critic_name = "distributional_value"
    label_keys = ("cond",)

    def prepare(self, data: Any, out: Any, progress: bool = True) -> dict[str, float]:
        summary = super().prepare(data, out, progress)
        cfg = getattr(self.policy, "config", None)
        if cfg is not None and hasattr(cfg, "inference_cond"):
            cfg.inference_cond = 1
            cfg.inference_guidance = self.config.guidance  # type: ignore[attr-defined]
        return summary

    def update(self, batch: Batch) -> dict[str, float]:
        per_sample = self.policy.loss(batch, cond=batch["cond"], generator=self.generator)  # [B]
        return self.step(per_sample.mean())


class AdvantageWeighted(CreditAlgorithm):
    """L(theta) = E [ w(o, A) L_FM(theta; o, A) ] / E [ w ], with w from the critic."""

    label_keys = ("weight",)

    def update(self, batch: Batch) -> dict[str, float]:
        per_sample = self.policy.loss(batch, generator=self.generator)  # [B]
        w = batch["weight"].to(per_sample.device)
        metrics = self.step((w * per_sample).sum() / w.sum().clamp(min=1e-8))
        metrics["weight_mean"] = float(w.mean())
        return metrics


@ALGORITHMS.register("aloe")
class ALOE(AdvantageWeighted):
    """Advantage-weighted flow matching with a chunk-level TD Q ensemble evaluating the current policy:

        w = min(exp((Q(o, A) - mean_{j<M} Q(o, A'_j)) / beta), w_max),  A'_j ~ pi(. | o),
        L(theta) = E [ w L_FM(theta; o, A) ] / E [ w ].

    With ``critic.mode=indicator`` the thresholded advantage conditions the policy as in RECAP instead
    (CFG scale ``guidance`` at inference).
    """

    critic_name = "chunk_q"

    @property
    def indicator(self) -> bool:
        return self.config.critic.get("mode", "weight") == "indicator"  # type: ignore[attr-defined]

    def needed_labels(self) -> tuple[str, ...]:
        return ("cond",) if self.indicator else ("weight",)

    def prepare(self, data: Any, out: Any, progress: bool = True) -> dict[str, float]:
        summary = super().prepare(data, out, progress)
        if self.indicator:
            self.policy.config.inference_cond = 1
            self.policy.config.inference_guidance = self.config.guidance  # type: ignore[attr-defined]
        return summary

    def update(self, batch: Batch) -> dict[str, float]:
        if self.indicator:
            per_sample = self.policy.loss(batch, cond=batch["cond"], generator=self.generator)
            return self.step(per_sample.mean())
        return super().update(batch)


@ALGORITHMS.register("habc")
class HABC(AdvantageWeighted):
    """Hierarchical advantage-weighted BC: gated viability/efficiency advantages,

    A_hat = (1 - g) z(A_v) + g z(A_e),  g = sigmoid(kappa (V_v(s) - tau)),
    w = clip(exp(A_hat / beta), 0, w_max) (mean 1), w = 1 on human frames,
    L(theta) = E [ w L_FM(theta; o, A) ] / E [ w ].
    """

    critic_name = "habc"


@ALGORITHMS.register("awbc")
class AWBC(AdvantageWeighted):
    """Advantage-weighted BC with an expectile value (the simple baseline):

    A_t = sum_{k<N} r_{t+k} + V(o_{t+N}) - V(o_t),  w = min(exp(A_t / beta), w_max),
    L(theta) = E [ w L_FM(theta; o, A) ] / E [ w ].
    """

    critic_name = "expectile_value"
