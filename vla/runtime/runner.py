"""``PolicyRunner``: a :class:`~vla.policy.Policy` as a :data:`~vla.runtime.executor.SampleFn`."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from vla.batch import observation_from_env
from vla.policy import Policy


def reseed(generator: torch.Generator, seed: int | None) -> None:
    """Restart ``generator`` at ``seed`` (None: a nondeterministic seed)."""
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)


class PolicyRunner:
    """Env observation -> chunk ``[H, A]`` (numpy, raw units), sampled without gradients.

    Noise comes from the runner's own seeded ``torch.Generator``, so a rollout is reproducible:
    :meth:`reseed` at each episode start. It is a CPU generator on every device: policies draw their
    noise on the CPU and move it (``torch.randn(shape, generator=g).to(device)``), so a seed gives the
    same noise on a CPU and a GPU.

    Args:
        policy: Any registered policy (``load_policy``); put in eval mode if it is an ``nn.Module``.
        cameras: Camera names the policy reads, in the env observation (``obs[cam]`` uint8 [H, W, 3]).
        device: Where the policy lives.
        cond: Advantage indicator for conditioned policies (0 or 1; None = the policy config's
            ``inference_cond``, which RECAP-trained checkpoints set to 1; else unconditioned).
        guidance: Classifier-free guidance scale (None = the config's ``inference_guidance``, else no CFG).
        num_steps: Integration steps of the sampler (None = the policy's default).
        seed: Seed of the noise generator (None = nondeterministic).
        rtc_beta_max: Real-time chunking's guidance clip, for policies whose config has ``rtc_beta_max``
            (None = the checkpoint's).
    """

    def __init__(
        self,
        policy: Policy,
        *,
        cameras: Sequence[str],
        device: str | torch.device = "cpu",
        cond: int | None = None,
        guidance: float | None = None,
        num_steps: int | None = None,
        seed: int | None = None,
        rtc_beta_max: float | None = None,
    ) -> None:
        config = getattr(policy, "config", None)  # a post-trained checkpoint names its inference defaults
        cond = cond if cond is not None else getattr(config, "inference_cond", None)
        guidance = guidance if guidance is not None else getattr(config, "inference_guidance", None)
        if cond not in (None, 0, 1):
            raise ValueError(f"cond={cond} must be 0, 1 or None")
        if rtc_beta_max is not None and hasattr(config, "rtc_beta_max"):  # ours and the LeRobot adapters
            config.rtc_beta_max = float(rtc_beta_max)  # type: ignore[union-attr]
        self.policy = policy
        self.cameras = list(cameras)
        self.device = torch.device(device)
        self.cond = None if cond is None else torch.full((1,), cond, dtype=torch.long, device=self.device)
        self.guidance = guidance
        self.num_steps = num_steps
        self.generator = torch.Generator()  # CPU, see above
        self.last_latency_s: float | None = None  # the last chunk's inference time
        self.reseed(seed)
        if isinstance(policy, torch.nn.Module):
            policy.eval()

    @property
    def chunk_size(self) -> int:
        return int(self.policy.chunk_size)

    @property
    def action_dim(self) -> int:
        return int(self.policy.action_dim)

    def reseed(self, seed: int | None) -> None:
        """Restart the noise stream (None: a nondeterministic seed)."""
        reseed(self.generator, seed)

    def __call__(
        self, obs: Mapping[str, Any], prefix: np.ndarray | None = None, prefix_delay: int = 0
    ) -> np.ndarray:  # [H, A]
        """A chunk for ``obs``; with ``prefix`` [P, A] (the committed actions of the previous chunk) the
        policy inpaints it (real-time chunking), the first ``prefix_delay`` of them frozen."""
        t0 = time.perf_counter()
        missing = [c for c in self.cameras if c not in obs]
        if missing:
            raise KeyError(f"observation has no camera {missing}; it has {sorted(obs)}")
        batch = observation_from_env(dict(obs), self.cameras, self.device)
        rtc: dict[str, Any] = {}
        if prefix is not None and len(prefix):
            rtc = {"prefix": torch.as_tensor(np.asarray(prefix))[None].float(), "prefix_delay": prefix_delay}
        with torch.no_grad() if rtc else torch.inference_mode():  # RTC differentiates through the expert
            chunk = self.policy.sample_chunk(
                batch,
                cond=self.cond,
                num_steps=self.num_steps,
                guidance=self.guidance,
                generator=self.generator,
                **rtc,
            )  # [1, H, A]
        if chunk.ndim != 3 or chunk.shape[0] != 1:
            raise ValueError(
                f"{type(self.policy).__name__}.sample_chunk returned {tuple(chunk.shape)}, not [1, H, A]"
            )
        out = chunk[0].float().cpu().numpy()
        self.last_latency_s = time.perf_counter() - t0  # inference latency, for diagnostics
        return out
