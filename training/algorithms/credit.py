"""Post-training from credit: a critic fitted on the episodes labels every frame, then the policy trains
on the labels. RECAP (indicator conditioning), ALOE, HABC and AWBC (advantage weights)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from training.algorithms.base import ALGORITHMS, AlgoConfig, GradientAlgorithm, require_labels
from training.critics import CRITICS, CriticConfig, critic_config
from training.distributed import global_mean, weighted_mean
from training.optim import optimizer_step
from vla.batch import Batch

LABELS_FILE = "labels.safetensors"
SUMMARY_FILE = "summary.json"


@dataclass
class CreditConfig(AlgoConfig):
    # the critic's typed config (its class's ``config_class``), built once from ``algo.critic``'s fields by
    # :meth:`CreditAlgorithm.make_config`
    critic: CriticConfig = field(default_factory=CriticConfig)
    guidance: float | None = None  # RECAP / ALOE indicator mode: CFG scale beta, the checkpoint's default


class CreditAlgorithm(GradientAlgorithm):
    """Fits ``critic_name`` in :meth:`prepare` (or reloads its labels on resume) and stores them in
    ``<out>/critic/`` beside the critic's weights: derived columns, never written into the dataset."""

    config_class = CreditConfig
    critic_name: ClassVar[str] = ""
    label_keys: ClassVar[tuple[str, ...]] = ()

    critic: Any = None  # the fitted critic (None when its labels were reloaded on resume)
    critic_overrides: ClassVar[dict[str, Any]] = {}  # critic fields the algorithm fixes, whatever the YAML

    @classmethod
    def make_config(cls, config: dict[str, Any] | None) -> CreditConfig:
        """``algo.*`` typed, ``critic`` as the config of ``critic_name``'s class (``CRITICS``).

        Raises:
            KeyError: An ``algo.critic.*`` field the critic's config does not have (one line, the known ones).
        """
        fields = dict(config or {})
        critic = fields.get("critic") or {}
        if isinstance(critic, CriticConfig):
            critic = dataclasses.replace(critic, **cls.critic_overrides) if cls.critic_overrides else critic
        else:
            critic = {**critic, **cls.critic_overrides}
        fields["critic"] = critic_config(cls.critic_name, critic)
        return super().make_config(fields)  # type: ignore[return-value]

    @classmethod
    def label_needs(cls, config: dict[str, Any]) -> tuple[bool, bool]:
        return True, False  # every critic scores episodes by outcome

    def prepare(self, data: Any, out: Any, progress: bool = True) -> dict[str, float]:
        require_labels(data, self.config.name, success=True)  # every critic scores episodes by outcome
        folder = Path(out) / "critic"
        if (folder / LABELS_FILE).is_file():  # resume: the labels of the critic fitted at the start
            labels = load_file(str(folder / LABELS_FILE))
            if len(next(iter(labels.values()))) != len(data):
                raise ValueError(f"{folder / LABELS_FILE} labels another dataset ({len(data)} frames now)")
            summary = json.loads((folder / SUMMARY_FILE).read_text())
        else:
            cls = CRITICS.get(self.critic_name)
            critic = cls(self.config.critic, data, self.policy, progress)  # type: ignore[attr-defined]
            self.critic = critic
            history = critic.fit(log=self.scalars)
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
        metrics = self.step(weighted_mean(per_sample, w))  # over the global batch
        metrics["weight_mean"] = float(w.mean())
        return metrics


@ALGORITHMS.register("aloe")
class ALOE(AdvantageWeighted):
    """Advantage-weighted flow matching with a chunk-level TD Q ensemble evaluating the current policy:

        y = sum_{i<H} gamma^i r_{t+i} + gamma^H (1 - done) agg_k Qbar_k(o_{t+H}, A'),
                                                          A' ~ pi_theta(. | o_{t+H}),
        w = min(exp((Q(o, A) - mean_{j<M} Q(o, A'_j)) / beta), w_max),  A'_j ~ pi_theta(. | o),
        L(theta) = E [ w L_FM(theta; o, A) ] / E [ w ].

    The ensemble is first fitted for the base policy (``critic.steps``), then (``critic.online``, the
    spec's default) keeps training during actor training: every actor step takes one TD step on the
    batch with A' sampled from the *current* actor, and the batch's weights use the updated Q and fresh
    samples of the current actor (normalised to mean 1 over the batch). ``critic.online=false`` is the
    one-step variant: weights labelled once from the base policy's Q (preset ``posttrain_aloe_onestep``).
    With ``critic.mode=indicator`` the thresholded advantage conditions the policy as in RECAP instead
    (CFG scale ``guidance`` at inference; one-step only).
    """

    critic_name = "chunk_q"

    @property
    def indicator(self) -> bool:
        return self.config.critic.mode == "indicator"  # type: ignore[attr-defined]

    @property
    def online(self) -> bool:
        return bool(self.config.critic.online) and not self.indicator  # type: ignore[attr-defined]

    def needed_labels(self) -> tuple[str, ...]:
        return ("cond",) if self.indicator else ("weight",)

    def prepare(self, data: Any, out: Any, progress: bool = True) -> dict[str, float]:
        summary = super().prepare(data, out, progress)
        if self.indicator:
            self.policy.config.inference_cond = 1
            self.policy.config.inference_guidance = self.config.guidance  # type: ignore[attr-defined]
        if self.online:
            if (
                self.critic is None
            ):  # resumed: the warm-started critic; its latest state comes with train_state
                from training.critics.base import load_critic_weights

                cls = CRITICS.get(self.critic_name)
                critic = cls(self.config.critic, data, self.policy, progress)  # type: ignore[attr-defined]
                self.critic = load_critic_weights(critic, Path(out) / "critic")
            c = self.critic
            params = [p for p in c.parameters() if p.requires_grad]
            self.critic_params = params
            self.critic_optimizer = torch.optim.AdamW(
                params, lr=c.cfg.lr_online, weight_decay=c.cfg.weight_decay
            )
            self.sample_generator = torch.Generator().manual_seed(c.cfg.seed + 2)
            data.labels["frame"] = torch.arange(len(data))  # the batch's frame indices, for the critic
        return summary

    def critic_step(self, idx: Tensor) -> tuple[float, Tensor]:
        """One TD step of the ensemble with A' ~ the current actor at o_{t+H}; returns the loss and M fresh
        chunks of the current actor at o_t [B, M, H, A]."""
        c = self.critic
        # 1 chunk at each o_{t+H} (bootstrap), m at each o_t (baseline: each o_t encoded once)
        boot = c.policy_chunks(self.policy, c.next_frames(idx), 1, self.sample_generator)[:, 0]  # [B, H, A]
        baseline = c.policy_chunks(self.policy, idx, c.cfg.samples, self.sample_generator)  # [B, m, H, A]
        c.train()
        loss = c.loss(idx, boot).mean()
        optimizer_step(loss, self.critic_params, self.critic_optimizer, 10.0, what="aloe: the online critic")
        c.after_step()
        c.eval()
        return float(loss.detach()), baseline

    def update(self, batch: Batch) -> dict[str, float]:
        if self.indicator:
            per_sample = self.policy.loss(batch, cond=batch["cond"], generator=self.generator)
            return self.step(per_sample.mean())
        if not self.online:
            return super().update(batch)
        from training.critics.targets import advantage_weights

        idx = batch["frame"].long().cpu()
        critic_loss, baseline = self.critic_step(idx)
        with torch.no_grad():
            _, adv = self.critic.advantage(idx, baseline)
            w = advantage_weights(adv, self.critic.cfg.beta, self.critic.cfg.w_max)
            w = w / global_mean(w).clamp(min=1e-8)  # mean 1 over the global batch
        per_sample = self.policy.loss(batch, generator=self.generator)  # [B]
        w = w.to(per_sample.device)
        metrics = self.step(weighted_mean(per_sample, w))  # over the global batch
        metrics.update(critic_loss=critic_loss, weight_max=float(w.max()), advantage_mean=float(adv.mean()))
        return metrics

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        if self.online and self.critic is not None:
            state["critic"] = {k: v.detach().clone() for k, v in self.critic.state_dict().items()}
            state["critic_optimizer"] = self.critic_optimizer.state_dict()
            state["sample_generator"] = self.sample_generator.get_state()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if self.online and "critic" in state:
            self.critic.load_state_dict(state["critic"], strict=False)
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
            self.sample_generator.set_state(state["sample_generator"])


@ALGORITHMS.register("habc")
class HABC(AdvantageWeighted):
    """Hierarchical advantage-weighted BC: gated viability/efficiency advantages,

    A_hat = (1 - g) z(A_v) + g z(A_e),  g = sigmoid(kappa (V_v(s) - tau)),
    w = clip(exp(A_hat / beta), 0, w_max) (mean 1), w = 1 on human frames,
    L(theta) = E [ w L_FM(theta; o, A) ] / E [ w ],

    with z the standardisation over each batch's autonomous frames (``critic.standardise="batch"``, the
    spec) or over the dataset once (``"dataset"``).
    """

    critic_name = "habc"

    @property
    def per_batch(self) -> bool:
        return self.config.critic.standardise == "batch"  # type: ignore[attr-defined]

    def needed_labels(self) -> tuple[str, ...]:
        return ("a_v", "a_e", "gate", "human") if self.per_batch else ("weight",)

    def batch_weights(self, batch: Batch) -> Tensor:
        """w of the batch's frames, z taken over the batch's autonomous frames [B]."""
        from training.critics.targets import habc_weights

        c = self.config.critic  # type: ignore[attr-defined]
        return habc_weights(batch["a_v"], batch["a_e"], batch["gate"], batch["human"].bool(), c.beta, c.w_max)

    def update(self, batch: Batch) -> dict[str, float]:
        if not self.per_batch:
            return super().update(batch)
        per_sample = self.policy.loss(batch, generator=self.generator)  # [B]
        w = self.batch_weights(batch).to(per_sample.device)
        metrics = self.step(weighted_mean(per_sample, w))  # over the global batch
        metrics["weight_mean"] = float(w.mean())
        metrics["weight_max"] = float(w.max())
        return metrics


@ALGORITHMS.register("awbc")
class AWBC(AdvantageWeighted):
    """Advantage-weighted BC with an expectile value (the simple baseline):

    A_t = sum_{k<N} r_{t+k} + V(o_{t+N}) - V(o_t),  w = min(exp(A_t / beta), w_max),
    L(theta) = E [ w L_FM(theta; o, A) ] / E [ w ].
    """

    critic_name = "expectile_value"
