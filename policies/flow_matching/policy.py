"""``FlowMatchingPolicy``: our compact VLA behind the :class:`vla.policy.Policy` protocol."""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from policies.flow_matching.config import FlowMatchingConfig
from policies.flow_matching.encoders import make_tokenizer
from policies.flow_matching.model import KV, FlowMatchingModel
from vla.batch import ACTION, IMAGE_PREFIX, STATE, TASK, Batch, masked_chunk_mean
from vla.checkpoint import load_model_state, load_stats, read_config, save_checkpoint
from vla.data.stats import Normalizer
from vla.flow import RTCGuide, integrate, rtc_prefix_weights, sample_beta
from vla.policy import POLICIES
from vla.sharding import draw

Stats = dict[str, dict[str, np.ndarray]]


def _identity_stats(cfg: FlowMatchingConfig) -> Stats:
    def unit(n: int) -> dict[str, np.ndarray]:
        return {"mean": np.zeros(n), "std": np.ones(n), "min": -np.ones(n), "max": np.ones(n)}

    return {STATE: unit(cfg.state_dim), ACTION: unit(cfg.action_dim)}


@POLICIES.register("flow_matching")
class FlowMatchingPolicy(nn.Module):
    """Images + proprio + instruction -> action chunk [B, H, A] by flow matching (pi0-style).

    Training (per sample, reduced by the algorithm):
        x_tau = tau * A + (1 - tau) * eps,   u = A - eps
        L_FM = mean_{h, a} || v_theta(x_tau, tau, o) - u ||^2
    with tau = 1 - (eps_t + (1 - eps_t) s), s ~ Beta(1.5, 1) (pi0's schedule, tau = 1 is data).
    Sampling: K Euler steps x <- x + v / K from x_0 ~ N(0, I), the prefix encoded once (KV cache).
    Advantage conditioning (RECAP, pi*0.6): a zero-initialised ``nn.Embedding(2, d_expert)`` added to the
    expert tokens, dropped with probability p in training; classifier-free guidance at sampling:
        v = v_u + beta (v_pos - v_u)   (the expert runs on both in one batch; the prefix cache is shared).
    """

    config_class = FlowMatchingConfig

    def __init__(self, config: FlowMatchingConfig, stats: Stats | None = None) -> None:
        super().__init__()
        self.config = config
        self.tokenizer = make_tokenizer(config.tokenizer)
        self.model = FlowMatchingModel(config, self.tokenizer.vocab_size)
        self.stats = stats or _identity_stats(config)
        self.normalizer = Normalizer(self.stats, {STATE: config.state_norm, ACTION: config.action_norm})
        self.chunk_size = config.chunk_size
        self.action_dim = config.action_dim

    @property
    def device(self) -> torch.device:
        return self.model.action_out.weight.device

    # ---- inputs ------------------------------------------------------------------------------------
    def _prefix(self, obs: Batch) -> tuple[Tensor, Tensor]:
        missing = [IMAGE_PREFIX + c for c in self.config.cameras if IMAGE_PREFIX + c not in obs]
        if missing or STATE not in obs or TASK not in obs:
            raise KeyError(f"observation lacks {missing + [k for k in (STATE, TASK) if k not in obs]}")
        images = [obs[IMAGE_PREFIX + c].to(self.device) for c in self.config.cameras]
        text, text_mask = self.tokenizer(list(obs[TASK]), self.config.max_text_len)
        state = self.normalizer.normalize(STATE, obs[STATE].to(self.device).float())
        return self.model.encode_prefix(images, text.to(self.device), text_mask.to(self.device), state)

    def features(self, obs: Batch) -> Tensor:  # [B, d_model]
        """The prefix (vision-language-proprio) tokens, mean-pooled over valid tokens: what critics read
        when they reuse the policy's representation (callers detach it: stop-gradient)."""
        feats, mask = self._prefix(obs)
        m = mask.to(feats.dtype)[..., None]
        return (feats * m).sum(1) / m.sum(1).clamp(min=1.0)

    def sample_time(self, n: int, generator: torch.Generator | None = None) -> Tensor:  # [n]
        """tau = 1 - (eps + (1 - eps) s), s ~ Beta(a, b). With a generator (reproducible), Beta(a, 1) and
        Beta(1, b) are drawn by inverting their CDFs (s = u^(1/a), s = 1 - u^(1/b))."""
        cfg = self.config
        s = sample_beta(n, cfg.time_beta_a, cfg.time_beta_b, generator)
        return (1.0 - (cfg.time_eps + (1.0 - cfg.time_eps) * s)).to(self.device)

    def _drop_cond(self, cond: Tensor | None, generator: torch.Generator | None) -> Tensor | None:
        if cond is None:
            return None
        cond = cond.to(self.device).long()
        if self.training and self.config.cond_dropout > 0:
            drop = draw(torch.rand, cond.shape, generator).to(self.device) < self.config.cond_dropout
            cond = torch.where(drop, torch.full_like(cond, -1), cond)
        return cond

    # ---- Policy protocol ---------------------------------------------------------------------------
    def loss(
        self,
        batch: Batch,
        *,
        noise: Tensor | None = None,
        time: Tensor | None = None,
        cond: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:  # [B]
        """Per-sample flow-matching loss (mean over valid chunk steps and action dims)."""
        target = self.normalizer.normalize(ACTION, batch[ACTION].to(self.device).float())  # [B, H, A]
        b = target.shape[0]
        eps = (
            noise.to(self.device)
            if noise is not None
            else draw(torch.randn, target.shape, generator).to(self.device)  # per global-batch row
        )
        tau = time.to(self.device) if time is not None else self.sample_time(b, generator)
        x = tau[:, None, None] * target + (1.0 - tau[:, None, None]) * eps
        u = target - eps
        prefix, mask = self._prefix(batch)
        v = self.model.velocity(x, tau, self.model.kv_cache(prefix), mask, self._drop_cond(cond, generator))
        err = (v - u).pow(2).mean(-1)  # [B, H]
        return masked_chunk_mean(err, batch)

    @torch.no_grad()
    def sample_chunk(
        self,
        obs: Batch,
        *,
        cond: Tensor | None = None,
        noise: Tensor | None = None,
        num_steps: int | None = None,
        guidance: float | None = None,
        prefix: Tensor | None = None,
        prefix_delay: int = 0,
        generator: torch.Generator | None = None,
        use_cache: bool = True,
        num_samples: int = 1,
    ) -> Tensor:  # [B * num_samples, H, A]
        """K integration steps (:func:`vla.flow.integrate`, ``config.integrator``) from noise (tau = 0) to
        actions (tau = 1), in raw action units.

        ``num_samples`` = m: m chunks per observation (in a row) from one encoding of its prefix.

        Real-time chunking: ``prefix`` [B, P, A] (raw units) is what the robot will still execute of the
        previous chunk; its first ``prefix_delay`` actions run while this chunk is computed. Each step is
        guided towards it (:func:`vla.flow.rtc_guided_velocity`, weights :func:`vla.flow.rtc_prefix_weights`
        over the P actions), so the new chunk continues the committed motion without a jump.
        """
        k = num_steps or self.config.num_steps

        def encode() -> tuple[Tensor, Tensor]:  # the prefix of each observation, num_samples times in a row
            f, msk = self._prefix(obs)
            if num_samples == 1:
                return f, msk
            return f.repeat_interleave(num_samples, 0), msk.repeat_interleave(num_samples, 0)

        feats, mask = encode()
        b = feats.shape[0]
        if num_samples > 1:
            cond = cond.repeat_interleave(num_samples, 0) if cond is not None else None
            prefix = prefix.repeat_interleave(num_samples, 0) if prefix is not None else None
        shape = (b, self.config.chunk_size, self.config.action_dim)
        x = (
            noise.to(self.device).clone()
            if noise is not None
            else torch.randn(shape, generator=generator).to(self.device)
        )
        if cond is not None:
            cond = cond.to(self.device).long()
        guided = guidance is not None and cond is not None
        cache = self.model.kv_cache(feats)
        mask2, cond2 = mask, cond
        if guided:  # one expert pass on [unconditioned; conditioned]
            cache, mask2 = _repeat(cache), torch.cat([mask, mask])
            cond2 = torch.cat([torch.full_like(cond, -1), cond])
        rtc = None
        if prefix is not None:
            h, a_dim = self.config.chunk_size, self.config.action_dim
            p_len = min(prefix.shape[1], h)
            target = torch.zeros(b, h, a_dim, device=self.device)
            target[:, :p_len] = self.normalizer.normalize(ACTION, prefix[:, :p_len].to(self.device).float())
            weights = rtc_prefix_weights(h, prefix_delay, p_len, self.config.rtc_schedule)
            rtc = RTCGuide(target, weights, self.config.rtc_beta_max)
        lo, hi = self.config.guidance_interval

        def velocity(xx: Tensor, t: float) -> Tensor:
            nonlocal cache, mask, mask2
            tau = torch.full((b,), t, device=self.device)
            if not use_cache:  # the uncached reference: re-encode the prefix at every evaluation
                feats, mask = encode()
                cache = self.model.kv_cache(feats)
                if guided:
                    cache, mask2 = _repeat(cache), torch.cat([mask, mask])
            if guided and lo <= t < hi:
                v_u, v_c = self.model.velocity(
                    torch.cat([xx, xx]), torch.cat([tau, tau]), cache, mask2, cond2
                ).chunk(2)
                return v_u + guidance * (v_c - v_u)
            if guided:  # outside the guidance interval: the conditioned half of the cache
                return self.model.velocity(xx, tau, _half(cache), mask, cond)
            return self.model.velocity(xx, tau, cache, mask, cond)

        x = integrate(velocity, x, k, integrator=self.config.integrator, rtc=rtc)
        return self.normalizer.unnormalize(ACTION, x)

    # ---- checkpoints -------------------------------------------------------------------------------
    def save(
        self, directory: str | Path, train_state: dict | None = None, weights: dict[str, Tensor] | None = None
    ) -> Path:
        return save_checkpoint(
            directory,
            model=weights or self.model.state_dict(),
            config=asdict(self.config),
            stats=self.stats,
            train_state=train_state,
        )

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device = "cpu") -> FlowMatchingPolicy:
        raw = read_config(directory)
        known = {f.name for f in fields(FlowMatchingConfig)}
        unknown = set(raw) - known
        if unknown:
            raise KeyError(f"{Path(directory) / 'config.yaml'}: unknown fields {sorted(unknown)}")
        policy = cls(FlowMatchingConfig(**raw), load_stats(Path(directory) / "stats.safetensors"))
        policy.model.load_state_dict(load_model_state(directory))
        return policy.to(device).eval()


def _repeat(cache: list[KV]) -> list[KV]:
    return [(torch.cat([k, k]), torch.cat([v, v])) for k, v in cache]


def _half(cache: list[KV]) -> list[KV]:
    """The first copy of a :func:`_repeat`-ed cache (views, no copy)."""
    return [(k[: len(k) // 2], v[: len(v) // 2]) for k, v in cache]
