"""What every LeRobot VLA adapter shares (SmolVLA, pi0, pi0.5): the :class:`vla.policy.Policy` protocol
around a LeRobot flow-matching network that is used unchanged.

What is LeRobot's and what is ours:

- The network is LeRobot's (``VLAFlowMatching``, ``PI0Pytorch``, ``PI05Pytorch``): its ``embed_prefix`` /
  ``embed_suffix`` / ``denoise_step`` around a prefix KV cache, so LeRobot checkpoints load weight for weight
  (:mod:`policies.lerobot_checkpoint`).
- Pre-processing is ours (:mod:`policies.lerobot_preprocess`): raw batches (``vla.batch``) normalised,
  images resized with padding and mapped to [-1, 1], the prompt tokenised: what LeRobot's processor
  pipeline does, without the pipeline.
- Flow time follows OUR convention at the interface (tau = 1 is data, tau = 0 noise, as in METHODS.md);
  LeRobot's is the reverse (t = 1 noise), so ``t_lerobot = 1 - tau`` inside. ``noise`` is the same eps.
- The RECAP advantage indicator: a zero-initialised ``nn.Embedding(2, d_expert)`` (:class:`IndicatorSlot`)
  whose row is added to the action expert's action tokens (the last ``chunk_size`` tokens of
  ``embed_suffix``), dropped with probability ``cond_dropout`` in training. Classifier-free guidance is in
  the velocity this adapter gives the one integrator: the expert runs twice per evaluation (with and without
  the indicator) on one shared prefix KV cache, ``v = v_u + beta (v_pos - v_u)``.
- Sampling and real-time chunking are :func:`vla.flow.integrate`'s (in LeRobot's time convention,
  ``NOISE_AT_ONE``), as for our own policy: Euler steps as LeRobot's ``sample_actions`` takes them, or
  diffusers' schedulers; RTC's prefix weights and guidance clip are LeRobot's ``RTCProcessor``'s, its
  correction the paper's (through the network: :func:`vla.flow.rtc_guided_velocity`).

A subclass supplies the network-specific parts: :meth:`LeRobotFlowAdapter._image`, ``_prompts``,
``_flow_losses``, ``_prefix``, ``_denoise`` and ``_fix_lerobot_keys``, plus the asset folder (backbone
or tokenizer files) copied into every checkpoint; its config class translates LeRobot's ``config.json``
(:meth:`policies.lerobot_config.LeRobotAdapterConfig.from_lerobot`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import torch
from lerobot.policies.common.vla_utils import pad_vector
from torch import Tensor, nn

from policies import lerobot_checkpoint
from policies.lerobot_config import LeRobotAdapterConfig
from policies.lerobot_preprocess import FlowInputs, flow_actions, flow_inputs, flow_noise, identity_stats
from vla.batch import ACTION, STATE, Batch, masked_chunk_mean, repeat_batch
from vla.checkpoint import Stats
from vla.data.stats import Normalizer
from vla.flow import NOISE_AT_ONE, RTCGuide, integrate, rtc_prefix_weights, sample_beta
from vla.sharding import draw


class IndicatorSlot:
    """Mixin for a LeRobot flow network: the advantage-indicator embedding, added to the action tokens.

    LeRobot's ``forward`` / ``denoise_step`` take no extra argument, so the per-sample indicator rows
    ([B, d_expert], or None) are set for the duration of a call with :meth:`indicator_tokens`, and the
    subclass's ``embed_suffix`` calls :meth:`with_indicator` on its token embeddings.
    """

    indicator: nn.Embedding
    _indicator_rows: Tensor | None

    def init_indicator(self, width: int) -> None:
        self.indicator = nn.Embedding(2, width)
        nn.init.zeros_(self.indicator.weight)
        self._indicator_rows = None

    @contextmanager
    def indicator_tokens(self, rows: Tensor | None) -> Iterator[None]:
        previous, self._indicator_rows = self._indicator_rows, rows
        try:
            yield
        finally:
            self._indicator_rows = previous

    def with_indicator(self, embs: Tensor, chunk_size: int) -> Tensor:
        """Adds the current rows to the last ``chunk_size`` tokens of ``embs`` [B, T, d] (the action tokens;
        pi0's suffix starts with a state token)."""
        if self._indicator_rows is None:
            return embs
        rows = self._indicator_rows[:, None, :].to(embs.dtype)
        return torch.cat([embs[:, :-chunk_size], embs[:, -chunk_size:] + rows], dim=1)


class LeRobotFlowAdapter(nn.Module):
    """A LeRobot flow VLA as a chunking policy: per-sample flow-matching loss, K-step sampling,
    CFG, RTC.

    Training (per sample, reduced by the algorithm), in LeRobot's variables (t = 1 - tau):
        x_t = t eps + (1 - t) A,  u = eps - A,  L = mean_{valid h, a < A} || v_theta(x_t, t, o) - u ||^2
    with A, eps padded to ``max_action_dim`` (padded action dims excluded from the loss, as in LeRobot).
    Sampling: x <- x - v / K from t = 1 (noise) to t = 0, the prefix encoded once (KV cache).

    ``noise`` is ``[B, H, max_action_dim]`` (LeRobot's ``sample_actions`` convention) or ``[B, H, A]``, which
    is zero-padded to ``max_action_dim`` (deterministic; for a released checkpoint with padded dims pass
    the full width to stay in distribution). With no noise, eps ~ N(0, I) of the full width is drawn from
    ``generator`` (a CPU generator, as in the training loop).
    """

    config_class: ClassVar[type[LeRobotAdapterConfig]]
    asset_dir: ClassVar[str]  # checkpoint sub-folder holding the copied asset files
    asset_field: ClassVar[str]  # config field naming the local asset folder (backbone or tokenizer)
    lerobot_types: ClassVar[tuple[str, ...]]  # LeRobot ``config.json`` types this adapter loads

    model: Any  # the LeRobot network with an IndicatorSlot (and ``action_out_proj``)
    tokenizer: Any

    def __init__(self, config: LeRobotAdapterConfig, stats: Stats | None, model: nn.Module, tokenizer: Any):
        super().__init__()
        self.config = config
        self.model = model
        self.tokenizer = tokenizer
        self.stats = stats or identity_stats(config)
        self.normalizer = Normalizer(self.stats, {STATE: config.state_norm, ACTION: config.action_norm})
        self.chunk_size = config.chunk_size
        self.action_dim = config.action_dim
        if config.pretrained_path:
            self.load_lerobot_weights(config.pretrained_path)

    @property
    def device(self) -> torch.device:
        return self.model.action_out_proj.weight.device

    # ---- network-specific hooks --------------------------------------------------------------------
    def _image(self, img: Tensor) -> Tensor:
        """[B, 3, H, W] in [0, 1] -> the network's image input (resized with padding, in [-1, 1])."""
        raise NotImplementedError

    def _prompts(self, tasks: Sequence[str], state: Tensor) -> list[str]:
        """The text the tokenizer sees, from the instructions and the normalised (unpadded) state [B, S]."""
        raise NotImplementedError

    def _flow_losses(self, x: FlowInputs, actions: Tensor, eps: Tensor, t: Tensor) -> Tensor:
        """LeRobot's training forward: per-element squared errors [B, H, A_max] at LeRobot time ``t``."""
        raise NotImplementedError

    def _prefix(self, x: FlowInputs) -> tuple[Tensor, Any, Tensor]:
        """The prefix run once through the VLM: its pad mask [B, P], KV cache and last hidden states
        [B, P, d]."""
        raise NotImplementedError

    def _denoise(self, x: FlowInputs, prefix_pad: Tensor, cache: Any, x_t: Tensor, t: Tensor) -> Tensor:
        """LeRobot's ``denoise_step``: the velocity [B, H, A_max] at LeRobot time ``t`` [B]."""
        raise NotImplementedError

    def _fix_lerobot_keys(self, state: dict[str, Tensor]) -> dict[str, Tensor]:
        """Renames keys of an older LeRobot/openpi checkpoint layout (keys without the ``model.`` prefix)."""
        return state

    def features(self, obs: Batch) -> Tensor:  # [B, d]
        """The prefix (images, language, state) through the VLM, its last hidden states mean-pooled over the
        valid tokens: what a critic reads with ``critic.encoder=policy`` (callers detach it: stop-gradient;
        pi*0.6's value function also reads the VLM's representation)."""
        pad, _, hidden = self._prefix(self._inputs(obs))
        m = pad.to(hidden.dtype)[..., None]
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)

    # ---- inputs ------------------------------------------------------------------------------------
    def _inputs(self, obs: Batch) -> FlowInputs:
        """The network's inputs: :func:`policies.lerobot_preprocess.flow_inputs` with this adapter's hooks."""
        return flow_inputs(
            obs,
            self.config,
            self.normalizer,
            self.tokenizer,
            image=self._image,
            prompts=self._prompts,
            device=self.device,
        )

    def sample_time(self, n: int, generator: torch.Generator | None = None) -> Tensor:  # [n], tau
        """tau = 1 - (offset + scale s), s ~ Beta(a, b) (LeRobot's schedule, in our convention). With a
        generator, Beta(a, 1) and Beta(1, b) are drawn by inverting their CDFs (reproducible)."""
        cfg = self.config
        s = sample_beta(n, cfg.time_beta_a, cfg.time_beta_b, generator)
        return (1.0 - (cfg.time_offset + cfg.time_scale * s)).to(self.device)

    def _indicator_rows(
        self, cond: Tensor | None, b: int, generator: torch.Generator | None = None, dropout: bool = False
    ) -> Tensor | None:  # [B, d_expert] or None
        if cond is None:
            return None
        cond = cond.to(self.device).long().reshape(-1)
        if cond.shape[0] != b or bool(((cond != 0) & (cond != 1)).any()):
            raise ValueError(f"cond must be a [B={b}] tensor of 0/1 indicators, got {cond.tolist()}")
        rows = self.model.indicator(cond)
        if dropout and self.training and self.config.cond_dropout > 0:  # CFG training: drop the indicator
            keep = draw(torch.rand, (b,), generator) >= self.config.cond_dropout
            rows = rows * keep.to(rows)[:, None]
        return rows

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
        """Per-sample flow-matching loss (mean over valid chunk steps and the first ``action_dim`` dims).

        ``time`` is tau in our convention (1 = data); ``cond`` is dropped with probability ``cond_dropout``
        per sample in training mode.
        """
        cfg = self.config
        actions = flow_actions(batch, cfg, self.normalizer, self.device)  # [B, H, A_max]
        b = actions.shape[0]
        eps = flow_noise(noise, b, cfg, generator, self.device)
        tau = time.to(self.device).float() if time is not None else self.sample_time(b, generator)
        x = self._inputs(batch)
        with self.model.indicator_tokens(self._indicator_rows(cond, b, generator, dropout=True)):
            losses = self._flow_losses(x, actions, eps, 1.0 - tau)
        err = losses[:, :, : cfg.action_dim].mean(-1)  # [B, H]
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
        num_samples: int = 1,
    ) -> Tensor:  # [B * num_samples, H, A]
        """K integration steps (:func:`vla.flow.integrate`, ``config.integrator``) from noise to actions, in
        raw action units.

        With ``cond`` the indicator is added at every step; with ``cond`` and ``guidance`` = beta, each step
        runs the expert with and without it on the shared prefix cache: v = v_u + beta (v_pos - v_u).
        Without ``cond``, ``guidance`` is ignored (as in our flow-matching policy).

        Real-time chunking (:func:`vla.flow.rtc_guided_velocity`): ``prefix`` [B, P, A] (raw units)
        is what the robot still executes of the previous chunk, its first ``prefix_delay`` actions during
        this inference; each Euler step's velocity is guided towards it with LeRobot's prefix weights
        (schedule ``rtc_schedule``, guidance clipped at ``rtc_beta_max``).
        """
        cfg = self.config
        if num_samples > 1:  # m chunks per observation: the observations repeated (LeRobot's prefix cache
            # is LeRobot's structure; tiling it is not worth coupling to its internals)
            obs = repeat_batch(obs, num_samples)
            cond = cond.repeat_interleave(num_samples, 0) if cond is not None else None
            prefix = prefix.repeat_interleave(num_samples, 0) if prefix is not None else None
        inputs = self._inputs(obs)
        b = inputs.batch_size
        x = flow_noise(noise, b, cfg, generator, self.device).clone()  # [B, H, A_max] at t = 1
        rows = self._indicator_rows(cond, b)
        prefix_pad, cache, _ = self._prefix(inputs)
        rtc = self._rtc(prefix, prefix_delay, x.shape) if prefix is not None else None

        def velocity(x_t: Tensor, time: float) -> Tensor:  # LeRobot's convention: t = 1 noise, t = 0 data
            t = torch.tensor(time, dtype=torch.float32, device=self.device).expand(b)
            v = self._velocity(inputs, x_t, t, prefix_pad, cache, rows)
            if rows is not None and guidance is not None:
                v_u = self._velocity(inputs, x_t, t, prefix_pad, cache, None)
                v = v_u + guidance * (v - v_u)
            return v

        k = num_steps or cfg.num_steps
        x = integrate(velocity, x, k, convention=NOISE_AT_ONE, integrator=cfg.integrator, rtc=rtc)
        return self.normalizer.unnormalize(ACTION, x[:, :, : cfg.action_dim])

    def _velocity(
        self, x: FlowInputs, x_t: Tensor, t: Tensor, prefix_pad: Tensor, cache: Any, rows: Tensor | None
    ) -> Tensor:
        with self.model.indicator_tokens(rows):
            return self._denoise(x, prefix_pad, cache, x_t, t)

    def _rtc(self, prefix: Tensor, delay: int, shape: torch.Size) -> RTCGuide:
        """Real-time chunking's guide: the previous chunk's left-over in the model's (normalised, padded)
        action space, cut to the chunk length, with LeRobot's prefix weights (``rtc_schedule``)."""
        b, h, a_max = shape
        if prefix.ndim != 3 or prefix.shape[0] != b or prefix.shape[2] != self.config.action_dim:
            raise ValueError(
                f"prefix of shape {tuple(prefix.shape)}: expected [{b}, P, {self.config.action_dim}]"
            )
        p = min(prefix.shape[1], h)
        left = self.normalizer.normalize(ACTION, prefix[:, :p].to(self.device).float())
        target = torch.zeros(b, h, a_max, device=self.device)
        target[:, :p] = pad_vector(left, a_max)
        weights = rtc_prefix_weights(h, delay, p, self.config.rtc_schedule)
        return RTCGuide(target, weights, self.config.rtc_beta_max)

    # ---- checkpoints (policies.lerobot_checkpoint) -------------------------------------------------
    def save(
        self, directory: str | Path, train_state: dict | None = None, weights: dict[str, Tensor] | None = None
    ) -> Path:
        """Writes a checkpoint folder; the asset folder's small files (config, tokenizer, processor) go to
        ``<asset_dir>/`` so that :meth:`load` needs neither the network nor the original folder."""
        return lerobot_checkpoint.save_adapter(self, directory, train_state, weights)

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device = "cpu") -> LeRobotFlowAdapter:
        return lerobot_checkpoint.load_adapter(cls, directory, device)

    def load_lerobot_weights(self, path: str | Path) -> None:
        """Loads a LeRobot policy's ``model.safetensors``; only the indicator (ours) may be missing."""
        lerobot_checkpoint.load_lerobot_weights(self, path)

    @classmethod
    def from_lerobot_pretrained(
        cls, path: str | Path, stats: Stats | None = None, **overrides: object
    ) -> LeRobotFlowAdapter:
        """Builds the adapter from a LeRobot policy folder (``config.json`` + ``model.safetensors`` as written
        by ``save_pretrained``), offline.

        Released configs name their backbone or tokenizer by Hub id: pass the local folder as an override
        then (``vlm_model_name=`` for SmolVLA, ``tokenizer_path=`` for pi0 / pi0.5). Without ``stats``, they
        are read from the folder's LeRobot normaliser file (``policy_preprocessor*normalizer*.safetensors``).
        """
        return lerobot_checkpoint.adapter_from_lerobot(cls, path, stats, overrides)
