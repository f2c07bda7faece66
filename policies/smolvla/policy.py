"""``SmolVLAAdapter``: LeRobot's SmolVLA (``VLAFlowMatching``) behind the :class:`vla.policy.Policy` protocol.

What is LeRobot's and what is ours:

- The network is LeRobot's ``VLAFlowMatching`` unchanged (SmolVLM prefix, KV-cached cross-attending action
  expert), so LeRobot SmolVLA checkpoints load weight for weight
  (:meth:`SmolVLAAdapter.from_lerobot_pretrained`).
- Pre-processing is ours: raw batches (``vla.batch``) are normalised with :class:`vla.data.stats.Normalizer`,
  images resized with padding and mapped to [-1, 1], ``task + "\\n"`` tokenised: what LeRobot's
  ``SmolVLAPolicy.prepare_images`` and its processor pipeline do, without the pipeline.
- Flow time follows OUR convention at the interface (tau = 1 is data, tau = 0 noise, as in METHODS.md);
  LeRobot's is the reverse (t = 1 noise), so ``t_lerobot = 1 - tau`` inside. ``noise`` is the same eps.
- The RECAP advantage indicator: a zero-initialised ``nn.Embedding(2, d_expert)`` whose row is added to the
  action expert's input tokens (the output of ``embed_suffix``: one token per chunk step), dropped with
  probability ``cond_dropout`` in training. Classifier-free guidance re-implements LeRobot's Euler loop so
  the expert runs twice per step (with and without the indicator) on one shared prefix KV cache:
  ``v = v_u + beta (v_pos - v_u)``.

pi0 / pi0.5 (``lerobot/policies/pi0``, ``pi05``) have the same structure (``embed_prefix`` /
``embed_suffix`` / ``denoise_step`` around a prefix KV cache), so the same adapter pattern applies: wrap
``embed_suffix`` (it returns ``(embs, pad_masks, att_masks, adarms_cond)``; pi0's suffix starts with a state
token, so the indicator goes on the last ``chunk_size`` tokens only) and call ``denoise_step`` twice per step
(pi0 clones the cache inside ``denoise_step``, so sharing it is already safe). They are not added here
because a CPU-testable tiny pi0 cannot be built through LeRobot's code without patching it:
``PaliGemmaWithExpertModel`` takes its sizes from ``get_gemma_config(variant)``, which knows only
``gemma_300m`` / ``gemma_2b`` (``PI0Config.__post_init__`` rejects any other variant), hard-codes the
vocabulary (257152 rows: 16M parameters even at width 64), the SigLIP tower (transformers' PaliGemma default,
so400m-sized: 1152 wide, 27 layers) with ``intermediate_size=4304`` / ``projection_dim=2048``, and casts to
bfloat16 by default; the processors tokenise with ``google/paligemma-3b-pt-224`` from the Hub. A tiny
PaliGemma is constructible offline from transformers configs (``PaliGemmaConfig`` + ``SiglipVisionConfig`` +
``GemmaConfig``), so what it would take is: (1) a subclass of ``PaliGemmaWithExpertModel`` (or a patched
``get_gemma_config`` plus a ``PI0Config`` subclass without the variant check) that builds tiny configs and a
small vocabulary; (2) a local tokenizer folder instead of the Hub name; (3) for pi0.5, its state
discretisation into the prompt (``Pi05PrepareStateTokenizerProcessorStep``: 256 bins of the normalised
state) and QUANTILES normalisation (q01/q99, which our stats have but ``Normalizer`` has no mode for);
(4) the adaRMS time conditioning of pi0.5 left as is (the indicator is still added to the action tokens).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np
import torch
from lerobot.policies.common.vla_utils import make_att_2d_masks, pad_vector, resize_with_pad
from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
from lerobot.policies.smolvla.modeling_smolvla import VLAFlowMatching
from safetensors.torch import load_file
from torch import Tensor, nn

from policies.smolvla.config import SmolVLAAdapterConfig
from vla.batch import ACTION, IMAGE_PREFIX, STATE, TASK, Batch, masked_chunk_mean
from vla.checkpoint import STATS_FILE, load_model_state, load_stats, read_config, save_checkpoint
from vla.data.stats import Normalizer
from vla.flow import sample_beta
from vla.policy import POLICIES

Stats = dict[str, dict[str, np.ndarray]]
BACKBONE_DIR = "backbone"  # the backbone's config/tokenizer/processor files, copied into each checkpoint
_LEROBOT_NORM = {"MEAN_STD": "mean_std", "MIN_MAX": "min_max"}


def _identity_stats(cfg: SmolVLAAdapterConfig) -> Stats:
    def unit(n: int) -> dict[str, np.ndarray]:
        return {"mean": np.zeros(n), "std": np.ones(n), "min": -np.ones(n), "max": np.ones(n)}

    return {STATE: unit(cfg.state_dim), ACTION: unit(cfg.action_dim)}


class IndicatorFlowMatching(VLAFlowMatching):
    """``VLAFlowMatching`` plus the advantage-indicator embedding, added to the expert's input tokens.

    LeRobot's ``forward`` / ``denoise_step`` take no extra argument, so the per-sample indicator rows
    ([B, d_expert], or None) are set for the duration of a call with :meth:`indicator_tokens`.
    """

    def __init__(self, config: SmolVLAConfig) -> None:
        super().__init__(config)
        self.indicator = nn.Embedding(2, self.vlm_with_expert.expert_hidden_size)
        nn.init.zeros_(self.indicator.weight)
        self._indicator_rows: Tensor | None = None

    @contextmanager
    def indicator_tokens(self, rows: Tensor | None) -> Iterator[None]:
        previous, self._indicator_rows = self._indicator_rows, rows
        try:
            yield
        finally:
            self._indicator_rows = previous

    def embed_suffix(self, noisy_actions: Tensor, timestep: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        embs, pad_masks, att_masks = super().embed_suffix(noisy_actions, timestep)  # embs [B, H, d_expert]
        if self._indicator_rows is not None:
            embs = embs + self._indicator_rows[:, None, :].to(embs.dtype)
        return embs, pad_masks, att_masks


@POLICIES.register("smolvla")
class SmolVLAAdapter(nn.Module):
    """SmolVLA as a chunking policy: per-sample flow-matching loss, K-step Euler sampling with CFG.

    Training (per sample, reduced by the algorithm), in LeRobot's variables (t = 1 - tau):
        x_t = t eps + (1 - t) A,  u = eps - A,  L = mean_{valid h, a < A} || v_theta(x_t, t, o) - u ||^2
    with A, eps padded to ``max_action_dim`` (padded action dims excluded from the loss, as in LeRobot).
    Sampling: x <- x - v / K from t = 1 (noise) to t = 0, the prefix encoded once (KV cache).

    ``noise`` is ``[B, H, max_action_dim]`` (LeRobot's ``sample_actions`` convention) or ``[B, H, A]``, which
    is zero-padded to ``max_action_dim`` (deterministic; for a released checkpoint with padded dims pass
    the full width to stay in distribution). With no noise, eps ~ N(0, I) of the full width is drawn from
    ``generator`` (a CPU generator, as in the training loop).
    """

    config_class = SmolVLAAdapterConfig

    def __init__(self, config: SmolVLAAdapterConfig, stats: Stats | None = None) -> None:
        super().__init__()
        folder = Path(config.vlm_model_name)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(
                f"vlm_model_name={config.vlm_model_name!r} is not a local SmolVLM folder with config.json "
                "(nothing is downloaded at run time)"
            )
        self.config = config
        self.model = IndicatorFlowMatching(SmolVLAConfig(**config.lerobot_kwargs()))
        self.tokenizer = self.model.vlm_with_expert.processor.tokenizer
        self.stats = stats or _identity_stats(config)
        self.normalizer = Normalizer(self.stats, {STATE: config.state_norm, ACTION: config.action_norm})
        self.chunk_size = config.chunk_size
        self.action_dim = config.action_dim
        if config.pretrained_path:
            self.load_lerobot_weights(config.pretrained_path)

    @property
    def device(self) -> torch.device:
        return self.model.action_out_proj.weight.device

    # ---- inputs ------------------------------------------------------------------------------------
    def _inputs(self, obs: Batch) -> tuple[list[Tensor], list[Tensor], Tensor, Tensor, Tensor]:
        """Images ([B, 3, h, w] in [-1, 1]) + masks, language tokens + mask [B, L], state [B, S_max]."""
        cfg, dev = self.config, self.device
        missing = [IMAGE_PREFIX + c for c in cfg.cameras if IMAGE_PREFIX + c not in obs]
        missing += [k for k in (STATE, TASK) if k not in obs]
        if missing:
            raise KeyError(f"observation lacks {missing}; it has {sorted(obs)}")
        state = obs[STATE].to(dev).float()
        if state.shape[-1] != cfg.state_dim:
            raise ValueError(f"{STATE} has {state.shape[-1]} dims; the config says {cfg.state_dim}")
        state = pad_vector(self.normalizer.normalize(STATE, state), cfg.max_state_dim)  # [B, S_max]
        images, masks = [], []
        for cam in cfg.cameras:
            img = obs[IMAGE_PREFIX + cam].to(dev).float()  # [B, 3, H, W] in [0, 1]
            img = resize_with_pad(img, cfg.image_size[0], cfg.image_size[1], pad_value=0)
            images.append(img * 2.0 - 1.0)  # SigLIP range
            masks.append(torch.ones(img.shape[0], dtype=torch.bool, device=dev))
        tasks = [t if t.endswith("\n") else f"{t}\n" for t in obs[TASK]]  # LeRobot's NewLineTaskProcessorStep
        enc = self.tokenizer(
            tasks,
            max_length=cfg.tokenizer_max_length,
            truncation=True,
            padding=cfg.pad_language_to,
            padding_side="right",
            return_tensors="pt",
        )
        tokens, token_mask = enc["input_ids"].to(dev), enc["attention_mask"].to(dev, torch.bool)
        return images, masks, tokens, token_mask, state

    def _noise(self, noise: Tensor | None, b: int, generator: torch.Generator | None) -> Tensor:
        cfg = self.config
        shape = (b, cfg.chunk_size, cfg.max_action_dim)
        if noise is None:
            return torch.randn(shape, generator=generator).to(self.device)
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
            keep = torch.rand(b, generator=generator) >= self.config.cond_dropout
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
        images, img_masks, tokens, token_mask, state = self._inputs(batch)
        with self.model.indicator_tokens(self._indicator_rows(cond, b, generator, dropout=True)):
            losses = self.model(images, img_masks, tokens, token_mask, state, actions, eps, 1.0 - tau)
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
    ) -> Tensor:  # [B, H, A]
        """K Euler steps from noise to actions, in raw action units.

        With ``cond`` the indicator is added at every step; with ``cond`` and ``guidance`` = beta, each step
        runs the expert with and without it on the shared prefix cache: v = v_u + beta (v_pos - v_u).
        Without ``cond``, ``guidance`` is ignored (as in our flow-matching policy).

        Real-time chunking goes through LeRobot's own ``RTCProcessor``: ``prefix`` [B, P, A] (raw units)
        is what the robot still executes of the previous chunk, its first ``prefix_delay`` actions during
        this inference; each Euler step's velocity is guided towards it with LeRobot's prefix weights
        (schedule ``rtc_schedule``, guidance clipped at ``rtc_beta_max``).
        """
        cfg = self.config
        images, img_masks, tokens, token_mask, state = self._inputs(obs)
        b = state.shape[0]
        x = self._noise(noise, b, generator).clone()  # [B, H, A_max] at t = 1
        rows = self._indicator_rows(cond, b)
        prefix_pad, cache = self._prefix_cache(images, img_masks, tokens, token_mask, state)
        k = num_steps or cfg.num_steps
        dt = -1.0 / k
        rtc, left_over = self._rtc(prefix, x.shape) if prefix is not None else (None, None)

        def velocity(x_t: Tensor, t: Tensor) -> Tensor:
            v = self._velocity(x_t, t, prefix_pad, cache, rows)
            if rows is not None and guidance is not None:
                v_u = self._velocity(x_t, t, prefix_pad, cache, None)
                v = v_u + guidance * (v - v_u)
            return v

        for step in range(k):  # LeRobot's euler_integrate, step for step
            time = 1.0 + step * dt
            t = torch.tensor(time, dtype=torch.float32, device=self.device).expand(b)
            if rtc is None:
                v = velocity(x, t)
            else:
                v = rtc.denoise_step(
                    x_t=x,
                    prev_chunk_left_over=left_over,
                    inference_delay=prefix_delay,
                    time=time,
                    original_denoise_step_partial=lambda x_t, t=t: velocity(x_t, t),
                    execution_horizon=left_over.shape[1],
                )
            x = x + dt * v
        return self.normalizer.unnormalize(ACTION, x[:, :, : cfg.action_dim])

    def _rtc(self, prefix: Tensor, shape: torch.Size) -> tuple[object, Tensor]:
        """LeRobot's RTC processor and the previous chunk's left-over in the model's (normalised, padded)
        action space, cut to the chunk length."""
        from lerobot.configs import RTCAttentionSchedule
        from lerobot.policies.rtc.configuration_rtc import RTCConfig
        from lerobot.policies.rtc.modeling_rtc import RTCProcessor

        b, h, a_max = shape
        if prefix.ndim != 3 or prefix.shape[0] != b or prefix.shape[2] != self.config.action_dim:
            raise ValueError(
                f"prefix of shape {tuple(prefix.shape)}: expected [{b}, P, {self.config.action_dim}]"
            )
        p = min(prefix.shape[1], h)
        left = self.normalizer.normalize(ACTION, prefix[:, :p].to(self.device).float())
        schedule = RTCAttentionSchedule[self.config.rtc_schedule.upper()]
        rtc = RTCProcessor(
            RTCConfig(
                prefix_attention_schedule=schedule,
                max_guidance_weight=self.config.rtc_beta_max,
                execution_horizon=p,
            )
        )
        return rtc, pad_vector(left, a_max)

    def _prefix_cache(
        self, images: list[Tensor], img_masks: list[Tensor], tokens: Tensor, token_mask: Tensor, state: Tensor
    ) -> tuple[Tensor, object]:
        """The prefix (images, language, state) run once through the VLM: its pad mask and KV cache."""
        m = self.model
        embs, pad, att = m.embed_prefix(images, img_masks, tokens, token_mask, state=state)
        _, cache = m.vlm_with_expert.forward(
            attention_mask=make_att_2d_masks(pad, att),
            position_ids=torch.cumsum(pad, dim=1) - 1,
            past_key_values=None,
            inputs_embeds=[embs, None],
            use_cache=True,
        )
        return pad, cache

    def _velocity(
        self, x: Tensor, t: Tensor, prefix_pad: Tensor, cache: object, rows: Tensor | None
    ) -> Tensor:
        # denoise_step crops the cache back to the prefix after each call, so it can be reused.
        with self.model.indicator_tokens(rows):
            return self.model.denoise_step(
                prefix_pad_masks=prefix_pad, past_key_values=cache, x_t=x, timestep=t
            )

    # ---- checkpoints -------------------------------------------------------------------------------
    def save(
        self, directory: str | Path, train_state: dict | None = None, weights: dict[str, Tensor] | None = None
    ) -> Path:
        """Writes a checkpoint folder; the backbone's config/tokenizer/processor files go to ``backbone/``
        so that :meth:`load` needs neither the network nor the original backbone folder."""
        directory = Path(directory)
        staged = directory.with_name(directory.name + ".backbone.tmp")
        shutil.rmtree(staged, ignore_errors=True)
        _copy_backbone_files(Path(self.config.vlm_model_name), staged)  # before the old folder is replaced
        path = save_checkpoint(
            directory,
            model=_unshared(weights or self.model.state_dict()),
            config=asdict(self.config),
            stats=self.stats,
            train_state=train_state,
        )
        staged.rename(path / BACKBONE_DIR)
        return path

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device = "cpu") -> SmolVLAAdapter:
        directory = Path(directory)
        raw = read_config(directory)
        known = {f.name for f in fields(SmolVLAAdapterConfig)}
        unknown = set(raw) - known
        if unknown:
            raise KeyError(f"{directory / 'config.yaml'}: unknown fields {sorted(unknown)}")
        raw.update(pretrained_path=None, load_vlm_weights=False)  # all weights come from model.safetensors
        if (directory / BACKBONE_DIR).is_dir():
            raw["vlm_model_name"] = str(directory / BACKBONE_DIR)
        policy = cls(SmolVLAAdapterConfig(**raw), load_stats(directory / STATS_FILE))
        policy.model.load_state_dict(load_model_state(directory))
        return policy.to(device).eval()

    def load_lerobot_weights(self, path: str | Path) -> None:
        """Loads a LeRobot ``SmolVLAPolicy`` ``model.safetensors`` (keys ``model.*``); only the indicator
        (ours) may be missing."""
        state = load_file(str(Path(path) / "model.safetensors"))
        foreign = sorted(k for k in state if not k.startswith("model."))
        result = self.model.load_state_dict(
            {k.removeprefix("model."): v for k, v in state.items() if k.startswith("model.")}, strict=False
        )
        # LeRobot writes tied weights once (safetensors' save_model): a key tied to a loaded one is fine
        own = self.model.state_dict()
        loaded = {own[k].data_ptr() for k in own.keys() - set(result.missing_keys)}
        missing = [k for k in result.missing_keys if own[k].data_ptr() not in loaded]
        missing = [k for k in missing if not k.startswith("indicator.")]
        if missing or result.unexpected_keys or foreign:
            raise KeyError(
                f"{path}/model.safetensors does not match this SmolVLA: missing {missing}, "
                f"unexpected {sorted(result.unexpected_keys) + foreign}"
            )

    @classmethod
    def from_lerobot_pretrained(
        cls, path: str | Path, stats: Stats | None = None, **overrides: object
    ) -> SmolVLAAdapter:
        """Builds the adapter from a LeRobot SmolVLA folder (``config.json`` + ``model.safetensors`` as
        written by ``SmolVLAPolicy.save_pretrained``), offline.

        The released configs name the backbone by Hub id: pass ``vlm_model_name=<local SmolVLM folder>`` as an
        override then. Without ``stats``, they are read from the folder's LeRobot normaliser file
        (``policy_preprocessor*normalizer*.safetensors``, written by the preprocessor's ``save_pretrained``).
        """
        path = Path(path)
        lr = json.loads((path / "config.json").read_text())
        if lr.get("type") != "smolvla":
            raise ValueError(f"{path}/config.json: type {lr.get('type')!r}, not 'smolvla'")
        if lr.get("empty_cameras", 0) or lr.get("adapt_to_pi_aloha", False):
            raise NotImplementedError(f"{path}: empty_cameras / adapt_to_pi_aloha are not supported")
        known = {f.name for f in fields(SmolVLAAdapterConfig)}
        kwargs: dict[str, object] = {k: v for k, v in lr.items() if k in known and k != "type"}
        inputs, outputs = lr["input_features"], lr["output_features"]
        kwargs["cameras"] = [k.removeprefix(IMAGE_PREFIX) for k, f in inputs.items() if f["type"] == "VISUAL"]
        kwargs["state_dim"] = inputs[STATE]["shape"][0]
        kwargs["action_dim"] = outputs[ACTION]["shape"][0]
        width, height = lr["resize_imgs_with_padding"]
        kwargs["image_size"] = [height, width]
        norm = lr.get("normalization_mapping", {})
        for key, name in (("STATE", "state_norm"), ("ACTION", "action_norm")):
            mode = norm.get(key, "MEAN_STD")
            if mode not in _LEROBOT_NORM:
                raise NotImplementedError(
                    f"{path}: {key} normalisation {mode} (supported: {list(_LEROBOT_NORM)})"
                )
            kwargs[name] = _LEROBOT_NORM[mode]
        kwargs.update(overrides, pretrained_path=str(path), load_vlm_weights=False)
        return cls(SmolVLAAdapterConfig(**kwargs), stats if stats is not None else lerobot_stats(path))


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


def _copy_backbone_files(src: Path, dst: Path) -> None:
    """Copies a backbone folder's small files (config, tokenizer, processor), never its weights."""
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file() and f.suffix not in (".safetensors", ".bin", ".pt", ".pth", ".msgpack", ".h5"):
            shutil.copy2(f, dst / f.name)


def _unshared(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """safetensors refuses tensors that share storage (tied weights): clone the repeats."""
    seen: set[int] = set()
    out = {}
    for k, v in state.items():
        ptr = v.untyped_storage().data_ptr()
        out[k] = v.clone() if ptr in seen else v
        seen.add(ptr)
    return out
