"""What every LeRobot VLA adapter shares (SmolVLA, pi0, pi0.5): the :class:`vla.policy.Policy` protocol
around a LeRobot flow-matching network that is used unchanged.

What is LeRobot's and what is ours:

- The network is LeRobot's (``VLAFlowMatching``, ``PI0Pytorch``, ``PI05Pytorch``): its ``embed_prefix`` /
  ``embed_suffix`` / ``denoise_step`` around a prefix KV cache, so LeRobot checkpoints load weight for weight.
- Pre-processing is ours: raw batches (``vla.batch``) are normalised with :class:`vla.data.stats.Normalizer`,
  images resized with padding and mapped to [-1, 1], the prompt tokenised: what LeRobot's processor pipeline
  does, without the pipeline.
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
``_flow_losses``, ``_prefix_cache`` and ``_denoise``, plus the asset folder (backbone or tokenizer files)
copied into every checkpoint.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from lerobot.policies.common.vla_utils import pad_vector
from safetensors.torch import load_file
from torch import Tensor, nn

from policies.lerobot_config import LeRobotAdapterConfig
from vla.batch import ACTION, IMAGE_PREFIX, STATE, TASK, Batch, masked_chunk_mean, repeat_batch
from vla.checkpoint import STATS_FILE, load_model_state, load_stats, read_config, save_checkpoint
from vla.data.stats import Normalizer
from vla.flow import NOISE_AT_ONE, RTCGuide, integrate, rtc_prefix_weights, sample_beta
from vla.sharding import draw

Stats = dict[str, dict[str, np.ndarray]]
LEROBOT_NORM = {"MEAN_STD": "mean_std", "MIN_MAX": "min_max", "QUANTILES": "quantiles"}
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".msgpack", ".h5")


def identity_stats(cfg: LeRobotAdapterConfig) -> Stats:
    def unit(n: int) -> dict[str, np.ndarray]:
        z, o = np.zeros(n), np.ones(n)
        return {"mean": z, "std": o, "min": -o, "max": o, "q01": -o, "q99": o}

    return {STATE: unit(cfg.state_dim), ACTION: unit(cfg.action_dim)}


@dataclass
class FlowInputs:
    """One observation batch in the network's terms."""

    images: list[Tensor]  # per camera [B, 3, h, w] in [-1, 1]
    img_masks: list[Tensor]  # per camera [B] bool
    tokens: Tensor  # [B, L] prompt token ids
    token_mask: Tensor  # [B, L] bool
    state: Tensor  # [B, S_max] normalised and zero-padded

    @property
    def batch_size(self) -> int:
        return int(self.tokens.shape[0])


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

    def _prefix_cache(self, x: FlowInputs) -> tuple[Tensor, Any]:
        """The prefix run once through the VLM: its pad mask [B, P] and KV cache."""
        raise NotImplementedError

    def _denoise(self, x: FlowInputs, prefix_pad: Tensor, cache: Any, x_t: Tensor, t: Tensor) -> Tensor:
        """LeRobot's ``denoise_step``: the velocity [B, H, A_max] at LeRobot time ``t`` [B]."""
        raise NotImplementedError

    def _fix_lerobot_keys(self, state: dict[str, Tensor]) -> dict[str, Tensor]:
        """Renames keys of an older LeRobot/openpi checkpoint layout (keys without the ``model.`` prefix)."""
        return state

    # ---- inputs ------------------------------------------------------------------------------------
    def _inputs(self, obs: Batch) -> FlowInputs:
        cfg, dev = self.config, self.device
        missing = [IMAGE_PREFIX + c for c in cfg.cameras if IMAGE_PREFIX + c not in obs]
        missing += [k for k in (STATE, TASK) if k not in obs]
        if missing:
            raise KeyError(f"observation lacks {missing}; it has {sorted(obs)}")
        state = obs[STATE].to(dev).float()
        if state.shape[-1] != cfg.state_dim:
            raise ValueError(f"{STATE} has {state.shape[-1]} dims; the config says {cfg.state_dim}")
        state = self.normalizer.normalize(STATE, state)
        images = [self._image(obs[IMAGE_PREFIX + cam].to(dev).float()) for cam in cfg.cameras]
        masks = [torch.ones(img.shape[0], dtype=torch.bool, device=dev) for img in images]
        enc = self.tokenizer(
            self._prompts(list(obs[TASK]), state),
            max_length=cfg.tokenizer_max_length,
            truncation=True,
            padding=cfg.pad_language_to,
            padding_side="right",
            return_tensors="pt",
        )
        tokens, token_mask = enc["input_ids"].to(dev), enc["attention_mask"].to(dev, torch.bool)
        return FlowInputs(images, masks, tokens, token_mask, pad_vector(state, cfg.max_state_dim))

    def _noise(self, noise: Tensor | None, b: int, generator: torch.Generator | None) -> Tensor:
        cfg = self.config
        shape = (b, cfg.chunk_size, cfg.max_action_dim)
        if noise is None:
            return draw(torch.randn, shape, generator).to(self.device)
        noise = noise.to(self.device).float()
        if tuple(noise.shape) == (b, cfg.chunk_size, cfg.action_dim):
            return pad_vector(noise, cfg.max_action_dim)
        if tuple(noise.shape) != shape:
            raise ValueError(
                f"noise {tuple(noise.shape)}: expected [B, H, A] or [B, H, max_action_dim] = {shape}"
            )
        return noise

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
        target = batch[ACTION].to(self.device).float()  # [B, H, A]
        b = target.shape[0]
        if tuple(target.shape[1:]) != (cfg.chunk_size, cfg.action_dim):
            raise ValueError(
                f"{ACTION} {tuple(target.shape)}: expected [B, {cfg.chunk_size}, {cfg.action_dim}]"
            )
        actions = pad_vector(self.normalizer.normalize(ACTION, target), cfg.max_action_dim)  # [B, H, A_max]
        eps = self._noise(noise, b, generator)
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
        x = self._noise(noise, b, generator).clone()  # [B, H, A_max] at t = 1
        rows = self._indicator_rows(cond, b)
        prefix_pad, cache = self._prefix_cache(inputs)
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

    # ---- checkpoints -------------------------------------------------------------------------------
    def save(
        self, directory: str | Path, train_state: dict | None = None, weights: dict[str, Tensor] | None = None
    ) -> Path:
        """Writes a checkpoint folder; the asset folder's small files (config, tokenizer, processor) go to
        ``<asset_dir>/`` so that :meth:`load` needs neither the network nor the original folder."""
        directory = Path(directory)
        staged = directory.with_name(f"{directory.name}.{self.asset_dir}.tmp")
        shutil.rmtree(staged, ignore_errors=True)
        copy_small_files(Path(getattr(self.config, self.asset_field)), staged)  # before the old folder goes
        path = save_checkpoint(
            directory,
            model=unshared(weights or self.model.state_dict()),
            config=asdict(self.config),
            stats=self.stats,
            train_state=train_state,
        )
        staged.rename(path / self.asset_dir)
        return path

    @classmethod
    def _checkpoint_overrides(cls) -> dict[str, Any]:
        """Config fields reset on :meth:`load` (all weights come from ``model.safetensors``)."""
        return {"pretrained_path": None}

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device = "cpu") -> LeRobotFlowAdapter:
        directory = Path(directory)
        raw = read_config(directory)
        known = {f.name for f in fields(cls.config_class)}
        unknown = set(raw) - known
        if unknown:
            raise KeyError(f"{directory / 'config.yaml'}: unknown fields {sorted(unknown)}")
        raw.update(cls._checkpoint_overrides())
        if (directory / cls.asset_dir).is_dir():
            raw[cls.asset_field] = str(directory / cls.asset_dir)
        policy = cls(cls.config_class(**raw), load_stats(directory / STATS_FILE))  # type: ignore[call-arg]
        policy.model.load_state_dict(load_model_state(directory))
        return policy.to(device).eval()

    def load_lerobot_weights(self, path: str | Path) -> None:
        """Loads a LeRobot policy's ``model.safetensors`` (keys ``model.*``; older layouts are renamed by
        :meth:`_fix_lerobot_keys`); only the indicator (ours) may be missing."""
        state = load_file(str(Path(path) / "model.safetensors"))
        state = {
            k if k.startswith("model.") else f"model.{k}": v for k, v in self._fix_lerobot_keys(state).items()
        }
        result = self.model.load_state_dict(
            {k.removeprefix("model."): v for k, v in state.items()}, strict=False
        )
        # LeRobot writes tied weights once (safetensors' save_model): a key tied to a loaded one is fine
        own = self.model.state_dict()
        loaded = {own[k].data_ptr() for k in own.keys() - set(result.missing_keys)}
        missing = [k for k in result.missing_keys if own[k].data_ptr() not in loaded]
        missing = [k for k in missing if not k.startswith("indicator.")]
        if missing or result.unexpected_keys:
            raise KeyError(
                f"{path}/model.safetensors does not match this {self.config.type}: missing {missing}, "
                f"unexpected {sorted(result.unexpected_keys)}"
            )

    @classmethod
    def _from_lerobot_fields(cls, lr: dict[str, Any]) -> dict[str, Any]:
        """Network fields of a LeRobot ``config.json`` under our names (beyond the shared ones)."""
        known = {f.name for f in fields(cls.config_class)}
        return {k: v for k, v in lr.items() if k in known and k != "type"}

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
        path = Path(path)
        lr = json.loads((path / "config.json").read_text())
        if lr.get("type") not in cls.lerobot_types:
            raise ValueError(f"{path}/config.json: type {lr.get('type')!r}, not one of {cls.lerobot_types}")
        if lr.get("empty_cameras", 0) or lr.get("adapt_to_pi_aloha", False):
            raise NotImplementedError(f"{path}: empty_cameras / adapt_to_pi_aloha are not supported")
        kwargs = cls._from_lerobot_fields(lr)
        inputs, outputs = lr["input_features"], lr["output_features"]
        kwargs["type"] = lr["type"]
        kwargs["cameras"] = [k.removeprefix(IMAGE_PREFIX) for k, f in inputs.items() if f["type"] == "VISUAL"]
        kwargs["state_dim"] = inputs[STATE]["shape"][0]
        kwargs["action_dim"] = outputs[ACTION]["shape"][0]
        norm = lr.get("normalization_mapping", {})
        for key, name in (("STATE", "state_norm"), ("ACTION", "action_norm")):
            mode = norm.get(key, "MEAN_STD")
            if mode not in LEROBOT_NORM:
                raise NotImplementedError(
                    f"{path}: {key} normalisation {mode} (supported: {list(LEROBOT_NORM)})"
                )
            kwargs[name] = LEROBOT_NORM[mode]
        kwargs.update(overrides, pretrained_path=str(path))
        cfg = cls.config_class(**kwargs)
        return cls(cfg, stats if stats is not None else lerobot_stats(path))  # type: ignore[call-arg]


def lerobot_stats(path: str | Path) -> Stats:
    """State/action statistics from a LeRobot policy folder's normaliser state (``<key>.<stat>`` tensors)."""
    files = sorted(Path(path).glob("policy_preprocessor*normalizer*.safetensors"))
    if not files:
        raise FileNotFoundError(
            f"{path}: no policy_preprocessor*normalizer*.safetensors; "
            f"pass stats= with '{STATE}' and '{ACTION}'"
        )
    out: Stats = {}
    for flat, value in load_file(str(files[0])).items():
        key, stat = flat.rsplit(".", 1)
        out.setdefault(key, {})[stat] = value.float().numpy()
    for key in (STATE, ACTION):
        if key not in out:
            raise KeyError(f"{files[0]}: no statistics for '{key}'; it has {sorted(out)}")
    return out


def copy_small_files(src: Path, dst: Path) -> None:
    """Copies a backbone/tokenizer folder's small files (config, tokenizer, processor), never its weights."""
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file() and f.suffix not in _WEIGHT_SUFFIXES:
            shutil.copy2(f, dst / f.name)


def unshared(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """safetensors refuses tensors that share storage (tied weights): clone the repeats."""
    seen: set[int] = set()
    out = {}
    for k, v in state.items():
        ptr = v.untyped_storage().data_ptr()
        out[k] = v.clone() if ptr in seen else v
        seen.add(ptr)
    return out
