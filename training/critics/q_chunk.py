"""ALOE's critic: a chunk-level Q ensemble trained by chunked TD, bootstrapping with chunks sampled from
the current policy (off-policy evaluation of that policy), with Polyak-averaged targets."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from tqdm import tqdm

from training.critics.base import CRITICS, Critic, CriticConfig, mlp
from training.critics.targets import (
    advantage_weights,
    aggregate_heads,
    chunk_td_target,
    episode_rewards,
    polyak_update,
    positive_threshold,
    recap_indicator,
)


@dataclass
class QChunkConfig(CriticConfig):
    ensemble: int = 10  # K heads
    chunk: int = 0  # H of the critic's chunks; 0 = the policy's chunk size
    gamma: float = 0.99  # per step
    polyak: float = 0.005  # tau of the target update
    aggregate: str = "min2"  # "min2" (min of two random heads) or "mean_std"
    samples: int = 4  # M policy chunks per frame: the baseline mean_j Q(o, A'_j) and the bootstrap A'
    beta: float = 0.1  # w = min(exp(A / beta), w_max)
    w_max: float = 20.0
    mode: str = "weight"  # "weight" (advantage-weighted) or "indicator" (threshold, RECAP's path)
    positive_fraction: float = 0.3
    # ALOE as specified: the ensemble keeps training during actor training, one TD step per actor step,
    # with A' sampled from the current actor (bootstrap and baseline). False: the one-step variant (Q fitted
    # once for the base policy, weights labelled once before actor training)
    online: bool = True
    lr_online: float = 3e-4  # the critic's learning rate during actor training
    # Flow-DPO's pairs: label() also gives, per frame, the best and the worst of the M policy chunks by
    # the ensemble's mean Q (``chosen`` / ``rejected``, raw units [N, H, A]) and their Q gap
    pairs: bool = False
    # [paper, NORA-1.5] the pairs' score adds -pair_anchor x mean |A' - A| (normalised units; A the data's
    # chunk at the frame): chunks far from the demonstrated or executed action rank lower. 0: Q alone
    pair_anchor: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.ensemble < 2 or self.samples < 1 or self.pair_anchor < 0:
            raise ValueError(
                f"ensemble={self.ensemble} >= 2, samples={self.samples} >= 1 and pair_anchor="
                f"{self.pair_anchor} >= 0 required"
            )
        if self.mode not in ("weight", "indicator") or self.aggregate not in ("min2", "mean_std"):
            raise ValueError(f"mode={self.mode!r} / aggregate={self.aggregate!r} not known")


class QEnsemble(nn.Module):
    """K MLP heads Q_k(feat, flat chunk): [B, d], [B, H, A] -> [K, B]."""

    def __init__(self, d: int, chunk_dim: int, k: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.heads = nn.ModuleList(mlp(d + chunk_dim, hidden, layers, 1) for _ in range(k))

    def forward(self, feat: Tensor, chunk: Tensor) -> Tensor:
        x = torch.cat([feat, chunk.flatten(1)], dim=-1)
        return torch.stack([h(x).squeeze(-1) for h in self.heads])


@CRITICS.register("chunk_q")
class ChunkQCritic(Critic):
    """Q_k(o_t, A_t), k = 1..K, regressed on the chunked TD target (Q-chunking; ALOE)

        y_t = sum_{i<H} gamma^i r_{t+i} + gamma^H (1 - done) agg_k Qbar_k(o_{t+H}, A'),  A' ~ pi(. | o_{t+H}),
        L = sum_k (Q_k(o_t, A_t) - y_t)^2,   Qbar <- (1 - tau) Qbar + tau Q,

    with RECAP's normalised reward (-1/T_max per step, -C_fail/T_max at a failed end), the sum truncated
    at the terminal. Labels: A(o, A_t) = Q(o, A_t) - mean_{j<M} Q(o, A'_j) and the weight
    w = min(exp(A / beta), w_max) as ``weight`` (or the thresholded indicator as ``cond``).
    Human chunks are critic data as they are.
    """

    config_class = QChunkConfig
    name = "chunk_q"

    def __init__(self, cfg: QChunkConfig, data, policy, progress: bool = True) -> None:
        super().__init__(cfg, data, policy, progress)
        if policy is None or not hasattr(policy, "sample_chunk"):
            raise ValueError("chunk_q bootstraps with the current policy's chunks: pass the policy")
        self.h = cfg.chunk or int(policy.chunk_size)
        n, a_dim = data.action.shape
        self.ensemble = QEnsemble(self.features.dim, self.h * a_dim, cfg.ensemble, cfg.hidden, cfg.layers)
        self.ensemble_target = copy.deepcopy(self.ensemble).requires_grad_(False)
        rewards = torch.zeros(n)
        done = torch.zeros(n, dtype=torch.bool)
        for e, meta in enumerate(data.episodes):
            sl = data.episode_frames(e)
            rewards[sl] = torch.from_numpy(episode_rewards(meta.length, meta.success, cfg.reward)).float()
            done[sl.stop - 1] = True
        self.rewards, self.done = rewards, done
        self.samples = self._policy_samples(policy)  # [N, M, H, A] normalised

    def _policy_samples(self, policy) -> Tensor:
        """M chunks of ``policy`` for every frame (the base policy, before actor training)."""
        cfg: QChunkConfig = self.cfg  # type: ignore[assignment]
        gen = torch.Generator().manual_seed(cfg.seed + 1)
        n = len(self.data)
        step = max(1, cfg.feature_batch // cfg.samples)
        batches = tqdm(range(0, n, step), desc="policy chunks", disable=not self.progress, unit="batch")
        return torch.cat(
            [self.policy_chunks(policy, torch.arange(s, min(s + step, n)), cfg.samples, gen) for s in batches]
        )

    def policy_chunks(self, policy, idx: Tensor, m: int, generator: torch.Generator) -> Tensor:
        """``m`` chunks A' ~ pi(. | o) of ``policy`` for each frame of ``idx``, normalised: [B, m, H, A]."""
        was_training = policy.training
        policy.eval()
        with torch.no_grad():
            obs = self.data.observations(idx)
            chunk = policy.sample_chunk(obs, generator=generator, num_samples=m).float().cpu()[:, : self.h]
        policy.train(was_training)
        if chunk.shape[1] < self.h:  # a critic chunk longer than the policy's: hold the last action
            chunk = torch.cat([chunk, chunk[:, -1:].expand(-1, self.h - chunk.shape[1], -1)], 1)
        return ((chunk - self.a_mean) / self.a_std).view(-1, m, self.h, chunk.shape[-1])

    def q_values(self, feat: Tensor, chunk: Tensor, target: bool = False) -> Tensor:  # [K, B]
        return (self.ensemble_target if target else self.ensemble)(feat, chunk)

    def q(self, obs, chunk: Tensor) -> Tensor:  # type: ignore[override]
        """Critic protocol: Q_k(o, A) [K, B] for raw observations and raw chunks [B, H, A]."""
        with torch.no_grad():
            return self.q_values(self.features.encode(obs), (chunk - self.a_mean) / self.a_std)

    def next_frames(self, idx: Tensor) -> Tensor:
        """o_{t+H} of each frame (the episode's last frame when the chunk reaches its end)."""
        steps = idx + self.h - 1
        end = self.data.episode_end[idx]
        return torch.minimum(torch.minimum(steps, end - 1) + 1, end - 1)

    def td_target(self, idx: Tensor, boot_chunks: Tensor | None = None) -> Tensor:  # [B]
        """y_t; ``boot_chunks`` [B, H, A] (normalised): A' at o_{t+H}, default the base policy's sample."""
        cfg: QChunkConfig = self.cfg  # type: ignore[assignment]
        steps = idx[:, None] + torch.arange(self.h)[None]  # [B, H]
        end = self.data.episode_end[idx][:, None]
        inside = steps < end
        steps_c = torch.minimum(steps, end - 1)
        rewards = torch.where(inside, self.rewards[steps_c], torch.zeros(()))
        dones = self.done[steps_c] | ~inside
        nxt = self.next_frames(idx)  # only used where no terminal is inside the chunk
        chunks = self.samples[nxt, 0] if boot_chunks is None else boot_chunks
        with torch.no_grad():
            boot = aggregate_heads(
                self.q_values(self.features(nxt), chunks, target=True), cfg.aggregate, self.generator
            )
        return chunk_td_target(rewards, dones, boot, cfg.gamma)

    def loss(self, idx: Tensor, boot_chunks: Tensor | None = None) -> Tensor:
        y = self.td_target(idx, boot_chunks)
        q = self.q_values(self.features(idx), self.chunks(idx, self.h))  # [K, B]
        return (q - y[None]).pow(2).sum(0)

    def advantage(self, idx: Tensor, policy_chunks: Tensor) -> tuple[Tensor, Tensor]:
        """(Q(o, A_t), A(o, A_t) = Q(o, A_t) - mean_j Q(o, A'_j)) [B] each, ensemble means; ``policy_chunks``
        [B, M, H, A] normalised."""
        feat = self.features(idx)
        q_data = self.q_values(feat, self.chunks(idx, self.h)).mean(0)
        m = policy_chunks.shape[1]
        q_pi = self.q_values(feat.repeat_interleave(m, 0), policy_chunks.flatten(0, 1)).mean(0)
        return q_data, q_data - q_pi.view(-1, m).mean(1)

    def after_step(self) -> None:
        polyak_update(self.ensemble_target, self.ensemble, self.cfg.polyak)  # type: ignore[attr-defined]

    def label(self) -> dict[str, Tensor]:
        cfg: QChunkConfig = self.cfg  # type: ignore[assignment]

        def adv(idx: Tensor) -> Tensor:
            return torch.stack(self.advantage(idx, self.samples[idx]), -1)

        both = self.per_frame(adv, batch=1024)
        value, a = both[:, 0], both[:, 1]
        out = {"value": value, "advantage": a}
        if cfg.mode == "indicator":
            human = self.data.is_intervention
            eps = positive_threshold(
                a[~human].numpy() if (~human).any() else a.numpy(), cfg.positive_fraction
            )
            out["cond"] = torch.from_numpy(recap_indicator(a.numpy(), human.numpy(), eps))
        else:
            w = advantage_weights(a, cfg.beta, cfg.w_max)
            out["weight"] = w / w.mean()
        if cfg.pairs:
            out.update(self.pairs())
        return out

    def pairs(self) -> dict[str, Tensor]:
        """Flow-DPO's preference pairs: of the M policy chunks A'_j of each frame, the one scored highest
        (``chosen``) and lowest (``rejected``), raw units [N, H, A], by

            score_j = mean_k Q_k(o, A'_j) - pair_anchor * mean |A'_j - A|   (A: the data's chunk);

        ``pair_gap`` [N] the score difference between them."""
        m = self.samples.shape[1]
        anchor = self.cfg.pair_anchor  # type: ignore[attr-defined]

        def best_worst(idx: Tensor) -> Tensor:  # [B, 3]: argmax, argmin, gap
            feat = self.features(idx).repeat_interleave(m, 0)
            q = self.q_values(feat, self.samples[idx].flatten(0, 1)).mean(0).view(-1, m)  # [B, M]
            if anchor:
                q = q - anchor * (self.samples[idx] - self.chunks(idx, self.h)[:, None]).abs().mean((-2, -1))
            gap = q.max(1).values - q.min(1).values
            return torch.stack([q.argmax(1).float(), q.argmin(1).float(), gap], 1)

        picked = self.per_frame(best_worst, batch=1024)
        rows = torch.arange(len(picked))

        def raw(j: Tensor) -> Tensor:  # [N, H, A]: the picked chunk of each frame, in raw units
            return self.samples[rows, j.long()] * self.a_std + self.a_mean

        return {"chosen": raw(picked[:, 0]), "rejected": raw(picked[:, 1]), "pair_gap": picked[:, 2]}
