"""HABC's critic: a viability head and an efficiency head on different data subsets, combined by a
state-adaptive gate into per-transition actor weights, with intervention-aware credit."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn import functional as F

from training.critics.base import CRITICS, Critic, CriticConfig, mlp
from training.critics.targets import habc_gate, habc_segments, habc_weights, standardise


@dataclass
class HABCConfig(CriticConfig):
    gate_tau: float = 0.8  # tau of g = sigmoid(kappa (V_v - tau))
    gate_kappa: float = 20.0
    beta: float = 0.05  # w = clip(exp(A_hat / beta), 0, w_max) on standardised advantages
    w_max: float = 20.0
    efficiency_weight: float = 1.0  # of the efficiency regression in the joint loss
    # z(.) of A_hat: "batch" standardises over each actor batch's autonomous frames (the spec); "dataset"
    # once over all autonomous frames (an ablation)
    standardise: str = "batch"
    # outcome labels only from segments the current policy executed (the spec); a list of sources whose
    # autonomous segments also count (e.g. ["policy", "demo", "scripted"])
    label_sources: tuple[str, ...] = ("policy",)
    # A_v: "one_step" = V_v(s_{t+1}) - V_v(s_t) (the spec); "monte_carlo" = y_seg - V_v(s_t), the one-step
    # advantages summed to the segment's end with its observed outcome as the terminal value, for every
    # autonomous segment (demonstrations included). The variant for data whose failures are uniformly
    # hopeless: there V_v is ~0 at every state, so one-step advantages are ~0 and z() puts them mid-batch.
    viability_advantage: str = "one_step"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.beta <= 0 or self.w_max <= 0:
            raise ValueError(f"beta={self.beta} and w_max={self.w_max} must be > 0")
        if self.standardise not in ("batch", "dataset"):
            raise ValueError(f"standardise={self.standardise!r}: use 'batch' or 'dataset'")
        if self.viability_advantage not in ("one_step", "monte_carlo"):
            raise ValueError(
                f"viability_advantage={self.viability_advantage!r}: use 'one_step' or 'monte_carlo'"
            )
        self.label_sources = tuple(self.label_sources)


@CRITICS.register("habc")
class ViabilityEfficiencyCritic(Critic):
    """Two heads on the autonomous segments the current policy executed (``source`` in ``label_sources``,
    "policy" by default; an autonomous segment ending at a takeover is a failure):

        V_v(s) = P(success):        L_v = BCE(V_v(s_t), y_seg)         on every such segment
        V_e(s) = -(steps to go)/T:  L_e = (V_e(s_t) + (T_seg - 1 - t)/T_max)^2   on successful ones

    Per transition, every autonomous frame (demonstrations included: they are actor data, not outcome
    labels): A_v = V_v(s_{t+1}) - V_v(s_t), A_e = -1/T_max + V_e(s_{t+1}) - V_e(s_t); at the end of a
    labelled segment the next values are its outcome (V_v = y, V_e = 0 on success, -1 on failure), at the
    end of an unlabelled one the heads' own values; g_t = sigmoid(kappa (V_v(s_t) - tau)). The variant
    ``viability_advantage="monte_carlo"`` sums the one-step A_v to the segment's end with the segment's
    observed outcome y_seg as the terminal value, A_v = y_seg - V_v(s_t), on every autonomous segment (the
    heads are still fitted on ``label_sources`` only).
    The actor's weight, A_hat = (1 - g) z(A_v) + g z(A_e), w = clip(exp(A_hat / beta), 0, w_max) renormalised
    to mean 1, human frames w = 1, is formed per actor batch (``standardise="batch"``, z over the batch's
    autonomous frames: :meth:`batch_weights`), or once over the dataset (``"dataset"``).
    """

    config_class = HABCConfig
    name = "habc"

    def __init__(self, cfg: HABCConfig, data, policy, progress: bool = True) -> None:
        super().__init__(cfg, data, policy, progress)
        self.head_v = mlp(self.features.dim, cfg.hidden, cfg.layers, 1)
        self.head_e = mlp(self.features.dim, cfg.hidden, cfg.layers, 1)
        n = len(data)
        self.y_v = torch.zeros(n)  # segment outcome
        self.y_e = torch.zeros(n)  # -(steps to go) / T_max
        self.succ_seg = torch.zeros(n, dtype=torch.bool)
        self.seg_end = torch.zeros(n, dtype=torch.long)  # absolute end (exclusive) of the frame's segment
        auto = torch.zeros(n, dtype=torch.bool)
        labelled = torch.zeros(n, dtype=torch.bool)  # autonomous frames of segments the policy executed
        t_max = cfg.reward.t_max
        for e, meta in enumerate(data.episodes):
            sl = data.episode_frames(e)
            by_policy = meta.source in cfg.label_sources
            for start, end, human, ok in habc_segments(data.is_intervention[sl].numpy(), meta.success):
                a, b = sl.start + start, sl.start + end
                self.seg_end[a:b] = b
                self.y_v[a:b] = float(ok)
                self.succ_seg[a:b] = ok
                self.y_e[a:b] = -torch.arange(b - a - 1, -1, -1, dtype=torch.float32) / t_max
                auto[a:b] = not human
                labelled[a:b] = by_policy and not human
        self.autonomous, self.labelled = auto, labelled
        self.train_frames = torch.nonzero(labelled).squeeze(1)
        if len(self.train_frames) == 0:
            raise ValueError(
                f"habc: no autonomous frames from episodes with source in {list(cfg.label_sources)} to fit "
                "the critic on (outcome labels come only from segments the policy executed: add rollouts)"
            )

    def heads(self, feat: Tensor) -> tuple[Tensor, Tensor]:
        """(V_v logit, V_e) [B] each."""
        return self.head_v(feat).squeeze(-1), self.head_e(feat).squeeze(-1)

    def loss(self, idx: Tensor) -> Tensor:
        logit_v, v_e = self.heads(self.features(idx))
        l_v = F.binary_cross_entropy_with_logits(logit_v, self.y_v[idx], reduction="none")
        l_e = (v_e - self.y_e[idx]).pow(2) * self.succ_seg[idx].float()
        return l_v + self.cfg.efficiency_weight * l_e  # type: ignore[attr-defined]

    def v(self, obs) -> Tensor:
        with torch.no_grad():
            return torch.sigmoid(self.heads(self.features.encode(obs))[0])

    def label(self) -> dict[str, Tensor]:
        cfg: HABCConfig = self.cfg  # type: ignore[assignment]
        both = self.per_frame(lambda idx: torch.stack(self.heads(self.features(idx)), -1))
        v_v, v_e = torch.sigmoid(both[:, 0]), both[:, 1]
        n = len(v_v)
        nxt = torch.arange(n) + 1
        at_end = nxt >= self.seg_end
        nxt = torch.minimum(nxt, torch.tensor(n - 1))
        outcome_v = torch.where(self.labelled, self.y_v, v_v)  # unlabelled segments: no outcome label
        outcome_e = torch.where(self.labelled, torch.where(self.succ_seg, 0.0, -1.0), v_e)
        v_v_next = torch.where(at_end, outcome_v, v_v[nxt])
        v_e_next = torch.where(at_end, outcome_e, v_e[nxt])
        a_v = v_v_next - v_v
        if cfg.viability_advantage == "monte_carlo":
            a_v = self.y_v - v_v  # sum_{k >= t} A_v(k) with V_v(s_end) = y_seg
        a_e = -1.0 / cfg.reward.t_max + v_e_next - v_e
        gate = habc_gate(v_v, cfg.gate_tau, cfg.gate_kappa)
        human = ~self.autonomous
        w = habc_weights(a_v, a_e, gate, human, cfg.beta, cfg.w_max)  # the "dataset" standardisation
        auto = self.autonomous
        a_hat = (1 - gate) * standardise(a_v, auto) + gate * standardise(a_e, auto)
        a_hat = torch.where(human, torch.zeros(()), a_hat)  # diagnostics: the gated, standardised advantage
        return {
            "weight": w,
            "a_v": a_v,
            "a_e": a_e,
            "gate": gate,
            "human": human,
            "value": v_v,
            "efficiency": v_e,
            "advantage": a_hat,
        }
