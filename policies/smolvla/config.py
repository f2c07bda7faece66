"""Configuration of the SmolVLA adapter (LeRobot's SmolVLA behind our ``Policy`` protocol).

Every field a LeRobot ``SmolVLAConfig`` needs to rebuild the network is mirrored here (the shared ones in
:class:`policies.lerobot_config.LeRobotAdapterConfig`), so a checkpoint's ``config.yaml`` alone (plus the
backbone's config/tokenizer files) rebuilds the model with no network.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from policies.lerobot_config import LeRobotAdapterConfig


@dataclass
class SmolVLAAdapterConfig(LeRobotAdapterConfig):
    """SmolVLA (SmolVLM prefix + a flow-matching action expert that cross-attends to it).

    ``vlm_model_name`` must be a LOCAL folder with the SmolVLM backbone's ``config.json``, tokenizer and
    processor files (weights are not read from it unless ``load_vlm_weights``; they come from
    ``pretrained_path`` or our own ``model.safetensors``). ``pretrained_path`` is an optional local LeRobot
    SmolVLA checkpoint folder (``config.json`` + ``model.safetensors`` as written by
    ``SmolVLAPolicy.save_pretrained``) whose weights are loaded at construction.

    Language: ``task + "\\n"`` tokenised with the backbone's tokenizer, right-padded (``pad_language_to``),
    truncated to ``tokenizer_max_length``.
    """

    TYPES: ClassVar[tuple[str, ...]] = ("smolvla",)

    type: str = "smolvla"
    vlm_model_name: str = ""  # local SmolVLM folder (config, tokenizer, processor)
    load_vlm_weights: bool = False  # read the backbone's own weights (bfloat16, LeRobot's choice) from it
    image_size: list[int] = field(default_factory=lambda: [512, 512])
    pad_language_to: str = "longest"
    # network (SmolVLAConfig fields, same names and defaults)
    num_vlm_layers: int = 16
    num_expert_layers: int = -1  # <= 0: as many as the (truncated) VLM
    self_attn_every_n_layers: int = 2
    expert_width_multiplier: float = 0.75
    attention_mode: str = "cross_attn"
    add_image_special_tokens: bool = False
    prefix_length: int = -1
    train_state_proj: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.vlm_model_name:
            raise ValueError("vlm_model_name: give a local SmolVLM folder (config + tokenizer + processor)")
        if self.attention_mode not in ("cross_attn", "self_attn"):
            raise ValueError(f"attention_mode={self.attention_mode!r}: cross_attn or self_attn")

    @classmethod
    def checkpoint_overrides(cls) -> dict[str, Any]:
        return {**super().checkpoint_overrides(), "load_vlm_weights": False}

    @classmethod
    def _lerobot_fields(cls, lr: dict[str, Any]) -> dict[str, Any]:
        kwargs = super()._lerobot_fields(lr)
        width, height = lr["resize_imgs_with_padding"]
        kwargs.update(image_size=[height, width], load_vlm_weights=False)
        return kwargs

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
