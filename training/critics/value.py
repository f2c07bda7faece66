"""State-value critics: RECAP's distributional value (pi*0.6) and the expectile value of AWBC."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from training.critics.base import CRITICS, Critic, CriticConfig, mlp
from training.critics.targets import (
    advantage_weights,
    episode_rewards,
    n_step_advantage,
    positive_threshold,
    recap_indicator,
    recap_segments,
    returns_to_go,
    two_hot,
)


@dataclass
class ValueConfig(CriticConfig):
    bins: int = 201  # distributional bins over the normalised return [-1, 0]
    n_step: int = 10  # N of the N-step advantage
    monte_carlo: bool = False  # A_t = R_t - V(o_t) instead of the N-step form
    positive_fraction: float = 0.3  # eps_task: the top this fraction of advantages are positive
    # AWBC (expectile value) only
    expectile: float = 0.7
    beta: float = 0.1  # advantage temperature of w = min(exp(A / beta), w_max) (A in normalised units)
    w_max: float = 20.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.bins < 2 or self.n_step < 1:
            raise ValueError(f"bins={self.bins} >= 2 and n_step={self.n_step} >= 1 required")
        if not 0.0 < self.expectile < 1.0 or self.beta <= 0:
            raise ValueError(f"expectile={self.expectile} in (0, 1) and beta={self.beta} > 0 required")


class _EpisodeValue(Critic):
    """Targets shared by the value critics: per frame, the normalised return G_t and reward r_t under
    RECAP's reward with its intervention split; segments are scored as separate episodes."""

    config_class = ValueConfig

    def __init__(self, cfg: ValueConfig, data, policy, progress: bool = True) -> None:
        super().__init__(cfg, data, policy, progress)
        n = len(data)
        self.returns = torch.zeros(n)
        self.rewards = torch.zeros(n)
        self.segments: list[tuple[int, int]] = []  # absolute frame ranges scored as one episode
        for e, meta in enumerate(data.episodes):
            sl = data.episode_frames(e)
            human = data.is_intervention[sl].numpy()
            for start, end, ok in recap_segments(meta.length, meta.success, human):
                r = episode_rewards(end - start, ok, cfg.reward)
                a, b = sl.start + start, sl.start + end
                self.rewards[a:b] = torch.from_numpy(r).float()
                self.returns[a:b] = torch.from_numpy(np.clip(returns_to_go(r), -1.0, 0.0)).float()
                self.segments.append((a, b))

    def value(self, feat: Tensor) -> Tensor:  # [B]
        raise NotImplementedError

    def v(self, obs) -> Tensor:
        """V(o) of raw observations [B] (Critic protocol)."""
        with torch.no_grad():
            return self.value(self.features.encode(obs))

    def advantages(self) -> tuple[Tensor, Tensor]:
        """(V [N], A [N]): N-step (or Monte-Carlo) advantages within each scored segment."""
        cfg: ValueConfig = self.cfg  # type: ignore[assignment]
        values = self.per_frame(lambda idx: self.value(self.features(idx))).numpy()
        adv = np.zeros(len(values))
        for a, b in self.segments:
            if cfg.monte_carlo:
                adv[a:b] = self.returns[a:b].numpy() - values[a:b]
            else:
                adv[a:b] = n_step_advantage(self.rewards[a:b].numpy(), values[a:b], cfg.n_step)
        return torch.from_numpy(values).float(), torch.from_numpy(adv).float()


@CRITICS.register("distributional_value")
class DistributionalValue(_EpisodeValue):
    """RECAP's value: p_phi(B | o) over ``bins`` bins of the normalised return, trained by cross-entropy

        L(phi) = E_t [ - sum_b y_b(G_t) log p_phi(b | o_t) ],  V(o) = sum_b p_phi(b | o) c_b

    (y = the two-hot projection of G_t onto the bin centres c_b in [-1, 0]). Labels: the advantage
    A_t = sum_{k<N} r_{t+k} + V(o_{t+N}) - V(o_t), the threshold eps = its (1 - 0.3) quantile over
    autonomous frames, and the indicator I_t = 1[A_t > eps] (1 on human frames) as ``cond``.
    """

    name = "distributional_value"

    def __init__(self, cfg: ValueConfig, data, policy, progress: bool = True) -> None:
        super().__init__(cfg, data, policy, progress)
        self.head = mlp(self.features.dim, cfg.hidden, cfg.layers, cfg.bins)
        self.register_buffer("centres", torch.linspace(-1.0, 0.0, cfg.bins))

    def value(self, feat: Tensor) -> Tensor:
        return torch.softmax(self.head(feat), -1) @ self.centres

    def loss(self, idx: Tensor) -> Tensor:
        logits = self.head(self.features(idx))
        target = two_hot(self.returns[idx], self.cfg.bins)  # type: ignore[attr-defined]
        return -(target * F.log_softmax(logits, -1)).sum(-1)

    def label(self) -> dict[str, Tensor]:
        values, adv = self.advantages()
        human = self.data.is_intervention
        auto = adv[~human].numpy() if (~human).any() else adv.numpy()
        eps = positive_threshold(auto, self.cfg.positive_fraction)  # type: ignore[attr-defined]
        self.threshold = eps
        cond = torch.from_numpy(recap_indicator(adv.numpy(), human.numpy(), eps))
        return {"cond": cond, "value": values, "advantage": adv}


@CRITICS.register("expectile_value")
class ExpectileValue(_EpisodeValue):
    """AWBC's value: expectile regression of the normalised return (IQL-style),

        L(psi) = E_t [ |kappa - 1(G_t - V(o_t) < 0)| (G_t - V(o_t))^2 ],

    and weights w_t = min(exp(A_t / beta), w_max) with the N-step advantage A_t, as ``weight``.
    """

    name = "expectile_value"

    def __init__(self, cfg: ValueConfig, data, policy, progress: bool = True) -> None:
        super().__init__(cfg, data, policy, progress)
        self.head = mlp(self.features.dim, cfg.hidden, cfg.layers, 1)

    def value(self, feat: Tensor) -> Tensor:
        return self.head(feat).squeeze(-1)

    def loss(self, idx: Tensor) -> Tensor:
        u = self.returns[idx] - self.value(self.features(idx))
        kappa = self.cfg.expectile  # type: ignore[attr-defined]
        return (kappa - (u < 0).float()).abs() * u.pow(2)

    def label(self) -> dict[str, Tensor]:
        cfg: ValueConfig = self.cfg  # type: ignore[assignment]
        values, adv = self.advantages()
        w = advantage_weights(adv, cfg.beta, cfg.w_max)
        return {"weight": w / w.mean(), "value": values, "advantage": adv}
