"""Configuration of the SmolVLA adapter (LeRobot's SmolVLA behind our ``Policy`` protocol).

Every field a LeRobot ``SmolVLAConfig`` needs to rebuild the network is mirrored here, so a checkpoint's
``config.yaml`` alone (plus the backbone's config/tokenizer files) rebuilds the model with no network.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NORM_MODES = ("mean_std", "min_max")


@dataclass
class SmolVLAAdapterConfig:
    """SmolVLA (SmolVLM prefix + a flow-matching action expert that cross-attends to it).

    ``vlm_model_name`` must be a LOCAL folder with the SmolVLM backbone's ``config.json``, tokenizer and
    processor files (weights are not read from it unless ``load_vlm_weights``; they come from
    ``pretrained_path`` or our own ``model.safetensors``). ``pretrained_path`` is an optional local LeRobot
    SmolVLA checkpoint folder (``config.json`` + ``model.safetensors`` as written by
    ``SmolVLAPolicy.save_pretrained``) whose weights are loaded at construction.

    Normalisation: state and action use our ``Normalizer`` (``"mean_std"`` as SmolVLA's defaults, or
    ``"min_max"`` to [-1, 1]) with the statistics given to the adapter, not LeRobot's processor pipeline.
    Images: resized with padding to ``image_size`` ([H, W]; the backbone's vision ``image_size``) and mapped
    from [0, 1] to [-1, 1] (SigLIP). Language: ``task + "\\n"`` tokenised with the backbone's tokenizer,
    right-padded (``pad_language_to``), truncated to ``tokenizer_max_length``.
    """

    type: str = "smolvla"
    vlm_model_name: str = ""  # local SmolVLM folder (config, tokenizer, processor)
    pretrained_path: str | None = None  # local LeRobot SmolVLA checkpoint folder, or None
    load_vlm_weights: bool = False  # read the backbone's own weights (bfloat16, LeRobot's choice) from it
    cameras: list[str] = field(default_factory=lambda: ["front"])  # order = the prefix's image order
    image_size: list[int] = field(default_factory=lambda: [512, 512])  # H, W after resize-with-pad
    state_dim: int = 8
    action_dim: int = 8
    max_state_dim: int = 32  # SmolVLA pads state/action to these (32 in the released checkpoints)
    max_action_dim: int = 32
    chunk_size: int = 50  # H
    n_action_steps: int = 50  # how many of the H actions a runtime executes (informational)
    num_steps: int = 10  # K Euler steps
    # language
    tokenizer_max_length: int = 48
    pad_language_to: str = "longest"  # or "max_length"
    # network (SmolVLAConfig fields, same names and defaults)
    num_vlm_layers: int = 16
    num_expert_layers: int = -1  # <= 0: as many as the (truncated) VLM
    self_attn_every_n_layers: int = 2
    expert_width_multiplier: float = 0.75
    attention_mode: str = "cross_attn"
    add_image_special_tokens: bool = False
    prefix_length: int = -1
    min_period: float = 4e-3
    max_period: float = 4.0
    # fine-tuning
    freeze_vision_encoder: bool = True
    train_expert_only: bool = True
    train_state_proj: bool = True
    # flow time (LeRobot/openpi schedule): t_lerobot = offset + scale * s, s ~ Beta(a, b); tau = 1 - t_lerobot
    time_beta_a: float = 1.5
    time_beta_b: float = 1.0
    time_scale: float = 0.999
    time_offset: float = 0.001
    # advantage indicator (RECAP): dropped with this probability in training (CFG training)
    cond_dropout: float = 0.3
    # real-time chunking through LeRobot's RTCProcessor: prefix-weight schedule and guidance clip
    rtc_schedule: str = "linear"  # LeRobot's RTCAttentionSchedule: zeros | ones | linear | exp
    rtc_beta_max: float = 10.0
    # normalisation of state / action with the stats stored in the checkpoint
    state_norm: str = "mean_std"
    action_norm: str = "mean_std"

    def __post_init__(self) -> None:
        if self.type != "smolvla":
            raise ValueError(f"type={self.type!r}: this config is for 'smolvla'")
        if self.rtc_schedule not in ("zeros", "ones", "linear", "exp"):
            raise ValueError(f"rtc_schedule={self.rtc_schedule!r}: use zeros, ones, linear or exp")
        if not self.vlm_model_name:
            raise ValueError("vlm_model_name: give a local SmolVLM folder (config + tokenizer + processor)")
        if self.chunk_size < 1 or self.num_steps < 1:
            raise ValueError(f"chunk_size={self.chunk_size} and num_steps={self.num_steps} must be >= 1")
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
        if self.attention_mode not in ("cross_attn", "self_attn"):
            raise ValueError(f"attention_mode={self.attention_mode!r}: cross_attn or self_attn")
        if not 0.0 <= self.cond_dropout <= 1.0:
            raise ValueError(f"cond_dropout={self.cond_dropout} not in [0, 1]")
        for name in ("state_norm", "action_norm"):
            if getattr(self, name) not in NORM_MODES:
                raise ValueError(f"{name}={getattr(self, name)!r}: one of {NORM_MODES}")
        if self.time_beta_a <= 0 or self.time_beta_b <= 0 or not 0 < self.time_scale + self.time_offset <= 1:
            raise ValueError("flow time: Beta(a, b) needs a, b > 0 and 0 < scale + offset <= 1")

    def lerobot_kwargs(self) -> dict[str, Any]:
        """The ``SmolVLAConfig`` fields that shape ``VLAFlowMatching`` (CPU, KV cache on, no compile)."""
        names = [
            *("chunk_size", "n_action_steps", "max_state_dim", "max_action_dim", "num_steps"),
            *("tokenizer_max_length", "pad_language_to", "vlm_model_name", "load_vlm_weights"),
            *("freeze_vision_encoder", "train_expert_only", "train_state_proj", "attention_mode"),
            *("add_image_special_tokens", "prefix_length", "num_expert_layers", "num_vlm_layers"),
            *("self_attn_every_n_layers", "expert_width_multiplier", "min_period", "max_period"),
        ]
        kwargs = {n: getattr(self, n) for n in names}
        kwargs["resize_imgs_with_padding"] = (self.image_size[1], self.image_size[0])  # LeRobot: (W, H)
        return {**kwargs, "use_cache": True, "compile_model": False, "device": "cpu"}
