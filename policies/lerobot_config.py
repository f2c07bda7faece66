"""Fields every LeRobot VLA adapter shares (SmolVLA, pi0, pi0.5): shapes, language, flow time, the RECAP
indicator, RTC and normalisation. Each adapter's config subclasses :class:`LeRobotAdapterConfig` and adds
its network fields, so a checkpoint's ``config.yaml`` alone rebuilds the model with no network.

Translation from a LeRobot policy's ``config.json`` is here too (:meth:`LeRobotAdapterConfig.from_lerobot`):
the shared fields (features, normalisation modes) in the base class, each network's names in its
subclass's :meth:`LeRobotAdapterConfig._lerobot_fields`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Self

from vla.batch import ACTION, IMAGE_PREFIX, STATE
from vla.flow import INTEGRATORS, RTC_SCHEDULES  # RTC_SCHEDULES: LeRobot's RTCAttentionSchedule's four

NORM_MODES = ("mean_std", "min_max", "quantiles")
LEROBOT_NORM = {"MEAN_STD": "mean_std", "MIN_MAX": "min_max", "QUANTILES": "quantiles"}  # theirs -> ours


@dataclass
class LeRobotAdapterConfig:
    """Shapes and sampling of a LeRobot flow-matching VLA behind our ``Policy`` protocol.

    Normalisation: state and action use our ``Normalizer`` (``"mean_std"``, ``"min_max"`` or ``"quantiles"``:
    [q01, q99] to [-1, 1]) with the statistics given to the adapter, not LeRobot's processor pipeline.
    Images: resized with padding to ``image_size`` ([H, W]) and mapped from [0, 1] to [-1, 1] (SigLIP).
    Flow time (LeRobot/openpi schedule): t_lerobot = offset + scale * s, s ~ Beta(a, b); tau = 1 - t_lerobot.
    """

    TYPES: ClassVar[tuple[str, ...]] = ()  # the registry names this config may carry in ``type``

    type: str = ""
    pretrained_path: str | None = None  # a local LeRobot checkpoint folder whose weights are loaded, or None
    cameras: list[str] = field(default_factory=lambda: ["front"])  # order = the prefix's image order
    image_size: list[int] = field(default_factory=lambda: [224, 224])  # H, W after resize-with-pad
    state_dim: int = 8
    action_dim: int = 8
    max_state_dim: int = 32  # the networks pad state/action to these (32 in the released checkpoints)
    max_action_dim: int = 32
    chunk_size: int = 50  # H
    n_action_steps: int = 0  # how many of the H actions a runtime executes (informational); <= 0: H
    num_steps: int = 10  # K integration steps
    integrator: str = (
        "euler"  # vla.flow.INTEGRATORS: euler (LeRobot's own loop), diffusers_euler, diffusers_heun
    )
    # language
    tokenizer_max_length: int = 48
    pad_language_to: str = "max_length"  # or "longest"
    # action-expert time embedding
    min_period: float = 4e-3
    max_period: float = 4.0
    # fine-tuning
    freeze_vision_encoder: bool = True
    train_expert_only: bool = True
    # flow time
    time_beta_a: float = 1.5
    time_beta_b: float = 1.0
    time_scale: float = 0.999
    time_offset: float = 0.001
    # advantage indicator (RECAP): dropped with this probability in training (CFG training)
    cond_dropout: float = 0.3
    # real-time chunking (vla.flow, LeRobot's RTCProcessor's weights): prefix-weight schedule, guidance clip
    rtc_schedule: str = "linear"  # zeros | ones | linear | exp
    rtc_beta_max: float = 10.0
    # normalisation of state / action with the stats stored in the checkpoint
    state_norm: str = "mean_std"
    action_norm: str = "mean_std"

    def __post_init__(self) -> None:
        if self.type not in self.TYPES:
            raise ValueError(f"type={self.type!r}: this config is for {' or '.join(map(repr, self.TYPES))}")
        if self.rtc_schedule not in RTC_SCHEDULES:
            raise ValueError(f"rtc_schedule={self.rtc_schedule!r}: use one of {RTC_SCHEDULES}")
        if self.integrator not in INTEGRATORS:
            raise ValueError(f"integrator={self.integrator!r}: use one of {', '.join(INTEGRATORS)}")
        if self.chunk_size < 1 or self.num_steps < 1:
            raise ValueError(f"chunk_size={self.chunk_size} and num_steps={self.num_steps} must be >= 1")
        if self.n_action_steps <= 0:
            self.n_action_steps = self.chunk_size
        if not 1 <= self.n_action_steps <= self.chunk_size:
            raise ValueError(f"n_action_steps={self.n_action_steps} not in [1, chunk_size={self.chunk_size}]")
        if not 1 <= self.action_dim <= self.max_action_dim:
            raise ValueError(f"action_dim={self.action_dim} not in [1, max_action_dim={self.max_action_dim}]")
        if not 1 <= self.state_dim <= self.max_state_dim:
            raise ValueError(f"state_dim={self.state_dim} not in [1, max_state_dim={self.max_state_dim}]")
        if not self.cameras or len(set(self.cameras)) != len(self.cameras):
            raise ValueError(f"cameras={self.cameras}: give at least one, without repeats")
        if len(self.image_size) != 2 or min(self.image_size) < 1:
            raise ValueError(f"image_size={self.image_size}: give [H, W]")
        if self.pad_language_to not in ("longest", "max_length") or self.tokenizer_max_length < 1:
            raise ValueError(
                f"pad_language_to={self.pad_language_to!r} (longest|max_length), "
                f"tokenizer_max_length={self.tokenizer_max_length} (>= 1)"
            )
        if not 0.0 <= self.cond_dropout <= 1.0:
            raise ValueError(f"cond_dropout={self.cond_dropout} not in [0, 1]")
        for name in ("state_norm", "action_norm"):
            if getattr(self, name) not in NORM_MODES:
                raise ValueError(f"{name}={getattr(self, name)!r}: one of {NORM_MODES}")
        if self.time_beta_a <= 0 or self.time_beta_b <= 0 or not 0 < self.time_scale + self.time_offset <= 1:
            raise ValueError("flow time: Beta(a, b) needs a, b > 0 and 0 < scale + offset <= 1")

    def lerobot_kwargs(self) -> dict[str, Any]:
        """The fields of the network's LeRobot config class (``SmolVLAConfig``, ``PI0Config``, ...)."""
        raise NotImplementedError(f"{type(self).__name__} does not translate back to a LeRobot config")

    @classmethod
    def checkpoint_overrides(cls) -> dict[str, Any]:
        """Fields reset when our checkpoint is loaded (all weights come from its ``model.safetensors``)."""
        return {"pretrained_path": None}

    @classmethod
    def _lerobot_fields(cls, lr: dict[str, Any]) -> dict[str, Any]:
        """Network fields of a LeRobot ``config.json`` under our names (beyond the shared ones)."""
        known = {f.name for f in fields(cls)}
        return {k: v for k, v in lr.items() if k in known and k != "type"}

    @classmethod
    def from_lerobot(cls, lr: dict[str, Any], overrides: dict[str, Any], where: str | Path) -> Self:
        """Our config from the fields of a LeRobot policy's ``config.json`` (``lr``, read from ``where``):
        cameras, state and action widths from its features, normalisation modes from its
        ``normalization_mapping`` (default ``MEAN_STD``), then ``overrides``."""
        if lr.get("empty_cameras", 0) or lr.get("adapt_to_pi_aloha", False):
            raise NotImplementedError(f"{where}: empty_cameras / adapt_to_pi_aloha are not supported")
        kwargs = cls._lerobot_fields(lr)
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
                    f"{where}: {key} normalisation {mode} (supported: {list(LEROBOT_NORM)})"
                )
            kwargs[name] = LEROBOT_NORM[mode]
        kwargs.update(overrides)
        return cls(**kwargs)
