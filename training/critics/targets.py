"""The credit-assignment arithmetic of RECAP, ALOE and HABC as small pure functions (numpy / torch).

Every function works on one episode (or a flat batch) and is tested on hand-computed cases. Notation
(``../shared/METHODS.md``): T frames, r_t rewards, gamma discount, H chunk length, T_max the task's
maximum episode length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from training.distributed import global_mean, global_sum


@dataclass
class RewardConfig:
    """RECAP's reward: -1 per step, 0 at success, -C_fail at a failed end; returns normalised by T_max
    and clipped to [-1, 0] (pi*0.6)."""

    c_fail: float = 300.0
    t_max: int = 100  # the task's maximum episode length (normalises returns)

    def __post_init__(self) -> None:
        if self.c_fail < 0 or self.t_max < 1:
            raise ValueError(f"c_fail={self.c_fail} must be >= 0 and t_max={self.t_max} >= 1")


# ---- RECAP ------------------------------------------------------------------------------------------------
def episode_rewards(length: int, success: bool, cfg: RewardConfig) -> np.ndarray:  # [T]
    """r_t = -1 for t < T - 1; r_{T-1} = 0 on success, -C_fail on failure (in units of T_max)."""
    r = np.full(length, -1.0)
    r[-1] = 0.0 if success else -cfg.c_fail
    return r / cfg.t_max


def returns_to_go(rewards: np.ndarray, gamma: float = 1.0) -> np.ndarray:  # [T]
    """R_t = sum_{k >= t} gamma^(k - t) r_k."""
    out = np.zeros(len(rewards))
    acc = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        acc = rewards[t] + gamma * acc
        out[t] = acc
    return out


def recap_segments(length: int, success: bool, is_intervention: np.ndarray) -> list[tuple[int, int, bool]]:
    """RECAP's intervention split: (start, end, success) segments scored as separate episodes.

    A successful episode with a takeover is split at the first human frame h: the autonomous prefix
    [0, h) is scored as a failed episode, the human suffix [h, T) as a successful one. Otherwise the
    whole episode is one segment with its outcome.
    """
    human = np.asarray(is_intervention, dtype=bool).reshape(-1)
    if len(human) != length:
        raise ValueError(f"is_intervention has {len(human)} frames, the episode {length}")
    h = int(np.argmax(human)) if human.any() else length
    if success and 0 < h < length:
        return [(0, h, False), (h, length, True)]
    return [(0, length, bool(success))]


def recap_returns(
    length: int, success: bool, is_intervention: np.ndarray, cfg: RewardConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Normalised, clipped returns [T] and rewards [T] of an episode, with the intervention split."""
    rets, rews = [], []
    for start, end, ok in recap_segments(length, success, is_intervention):
        r = episode_rewards(end - start, ok, cfg)
        rews.append(r)
        rets.append(returns_to_go(r))
    return np.clip(np.concatenate(rets), -1.0, 0.0), np.concatenate(rews)


def n_step_advantage(rewards: np.ndarray, values: np.ndarray, n: int, gamma: float = 1.0) -> np.ndarray:
    """A_t = sum_{k<N} gamma^k r_{t+k} + gamma^N V(o_{t+N}) - V(o_t); past the end V = 0 (terminal). [T]"""
    t_len = len(rewards)
    out = np.zeros(t_len)
    for t in range(t_len):
        end = min(t + n, t_len)
        disc = gamma ** np.arange(end - t)
        boot = gamma ** (end - t) * values[end] if end < t_len else 0.0
        out[t] = float(np.dot(disc, rewards[t:end])) + boot - values[t]
    return out


def positive_threshold(advantages: np.ndarray, positive_fraction: float = 0.3) -> float:
    """eps_task: the (1 - fraction) quantile, so that the top ``positive_fraction`` have A > eps."""
    if not 0.0 < positive_fraction < 1.0:
        raise ValueError(f"positive_fraction={positive_fraction} must be in (0, 1)")
    return float(np.quantile(advantages, 1.0 - positive_fraction))


def recap_indicator(advantages: np.ndarray, is_intervention: np.ndarray, eps: float) -> np.ndarray:
    """I_t = 1[A_t > eps], forced to 1 on human frames. int64 [T]."""
    human = np.asarray(is_intervention, dtype=bool).reshape(-1)
    return ((advantages > eps) | human).astype(np.int64)


def two_hot(values: Tensor, bins: int, lo: float = -1.0, hi: float = 0.0) -> Tensor:
    """Distributional target: each value spread over its two neighbouring bin centres. [B] -> [B, bins]."""
    pos = (values.clamp(lo, hi) - lo) / (hi - lo) * (bins - 1)
    low = pos.floor().long().clamp(max=bins - 2)
    frac = pos - low
    out = torch.zeros(*values.shape, bins, dtype=values.dtype, device=values.device)
    out.scatter_(-1, low[..., None], (1 - frac)[..., None])
    out.scatter_add_(-1, (low + 1)[..., None], frac[..., None])
    return out


# ---- ALOE ------------------------------------------------------------------------------------------------
def chunk_td_target(rewards: Tensor, dones: Tensor, bootstrap: Tensor, gamma: float) -> Tensor:  # [B]
    """y = sum_{i<H} gamma^i r_{t+i} + gamma^H (1 - done) Qbar(o_{t+H}, A'), truncated at a terminal.

    Args:
        rewards: [B, H] r_{t+i}; entries past the episode end are ignored.
        dones: [B, H] bool, True at the terminal step (and after it).
        bootstrap: [B] Qbar(o_{t+H}, A') (ignored where the chunk reaches a terminal).
    """
    b, h = rewards.shape
    alive = torch.cumprod(torch.cat([torch.ones(b, 1), (~dones[:, :-1]).float()], dim=1), dim=1)  # [B, H]
    disc = gamma ** torch.arange(h, dtype=rewards.dtype)
    ret = (alive * disc * rewards).sum(1)
    terminal = dones.any(1)
    return ret + (gamma**h) * (~terminal).float() * bootstrap


def aggregate_heads(q: Tensor, mode: str, generator: torch.Generator | None = None) -> Tensor:
    """Pessimistic ensemble: ``min2`` = min of 2 random heads, ``mean_std`` = mean - std. [K, B] -> [B]."""
    if mode == "min2":
        idx = torch.randperm(q.shape[0], generator=generator)[:2]
        return q[idx].min(0).values
    if mode == "mean_std":
        return q.mean(0) - q.std(0)
    raise ValueError(f"aggregate={mode!r}: use 'min2' or 'mean_std'")


@torch.no_grad()
def polyak_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """theta_bar <- (1 - tau) theta_bar + tau theta."""
    for tp, sp in zip(target.parameters(), source.parameters(), strict=True):
        tp.mul_(1.0 - tau).add_(sp, alpha=tau)


def advantage_weights(adv: Tensor, beta: float, w_max: float) -> Tensor:
    """w = min(exp(A / beta), w_max) (AWR / ALOE)."""
    return torch.exp(adv / beta).clamp(max=w_max)


# ---- HABC ------------------------------------------------------------------------------------------------
def habc_segments(is_intervention: np.ndarray, success: bool) -> list[tuple[int, int, bool, bool]]:
    """Split an episode into (start, end, human, outcome) segments by actor.

    Intervention-aware credit: an autonomous segment that ends at a takeover is a failure; the last
    autonomous segment takes the episode outcome. Human segments carry the episode outcome too (they
    are trained as plain BC, w = 1, and get no critic labels).
    """
    human = np.asarray(is_intervention, dtype=bool).reshape(-1)
    segs, start = [], 0
    for t in range(1, len(human) + 1):
        if t == len(human) or human[t] != human[start]:
            last = t == len(human)
            outcome = success if (last or human[start]) else False
            segs.append((start, t, bool(human[start]), bool(outcome)))
            start = t
    return segs


def habc_gate(v_viability: Tensor, tau: float, kappa: float) -> Tensor:
    """g_t = sigmoid(kappa (V_v(s_t) - tau)): viability first, efficiency once success is likely."""
    return torch.sigmoid(kappa * (v_viability - tau))


def standardise(x: Tensor, mask: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """z(x) = (x - mean) / std, the statistics taken over ``mask`` (default: all) of the global batch
    (:mod:`training.distributed`; this batch for one process); 0 where ``mask`` holds nothing."""
    m = torch.ones_like(x, dtype=torch.bool) if mask is None else mask
    n = global_sum(m.sum().to(x.dtype))
    mean = global_mean(x, m)
    var = global_sum((((x - mean) ** 2) * m.to(x.dtype)).sum()) / n.clamp(min=1)
    z = (x - mean) / (var.sqrt() + eps)
    return torch.where(n > 0, z, torch.zeros_like(x))  # no host sync (a CUDA batch stays on the device)


def habc_weights(
    a_viability: Tensor, a_efficiency: Tensor, gate: Tensor, human: Tensor, beta: float, w_max: float
) -> Tensor:
    """A_hat = (1 - g) z(A_v) + g z(A_e); w = clip(exp(A_hat / beta), 0, w_max) renormalised to mean 1
    over autonomous frames (z over autonomous frames too); human frames get w = 1. [B]"""
    auto = ~human
    a_hat = (1 - gate) * standardise(a_viability, auto) + gate * standardise(a_efficiency, auto)
    w = torch.exp(a_hat / beta).clamp(0.0, w_max)
    mean = global_mean(w, auto)  # over the global batch's autonomous frames (every rank calls it)
    w = torch.where(auto, w / mean.clamp(min=1e-12), w)
    return torch.where(human, torch.ones_like(w), w)
