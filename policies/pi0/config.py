"""Configuration of the pi0 / pi0.5 adapters (LeRobot's ``PI0Pytorch`` / ``PI05Pytorch`` behind our
``Policy`` protocol).

LeRobot builds these networks only at the released sizes (``get_gemma_config`` knows ``gemma_300m`` and
``gemma_2b``; the 257152-row vocabulary and the so400m SigLIP tower are hard-coded). Here every size is a
field: the defaults are the released ones, so a LeRobot pi0 / pi0.5 checkpoint loads weight for weight, and
a test can build a tiny network offline by giving ``vlm`` / ``expert`` / ``vision`` / ``vocab_size``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from policies.lerobot_config import LeRobotAdapterConfig


@dataclass
class GemmaSize:
    """One Gemma transformer's shape (openpi's ``gemma.Config``)."""

    width: int
    depth: int
    mlp_dim: int
    num_heads: int
    num_kv_heads: int
    head_dim: int


GEMMA_VARIANTS = {  # LeRobot's / openpi's get_gemma_config
    "gemma_300m": GemmaSize(width=1024, depth=18, mlp_dim=4096, num_heads=8, num_kv_heads=1, head_dim=256),
    "gemma_2b": GemmaSize(width=2048, depth=18, mlp_dim=16_384, num_heads=8, num_kv_heads=1, head_dim=256),
}


LEROBOT_NAMES = {  # ours -> LeRobot's PI0Config / PI05Config, where the names differ
    "num_steps": "num_inference_steps",
    "time_beta_a": "time_sampling_beta_alpha",
    "time_beta_b": "time_sampling_beta_beta",
    "time_scale": "time_sampling_scale",
    "time_offset": "time_sampling_offset",
}
JOINT_HEADS = 8  # LeRobot's compute_layer_complete reshapes the joint attention output to 8 heads


@dataclass
class SiglipSize:
    """The SigLIP vision tower (defaults: PaliGemma's so400m tower as LeRobot configures it)."""

    hidden_size: int = 1152
    intermediate_size: int = 4304
    num_hidden_layers: int = 27
    num_attention_heads: int = 16
    patch_size: int = 14


def _as(cls: type, value: Any) -> Any:
    return cls(**value) if isinstance(value, dict) else value


@dataclass
class PI0AdapterConfig(LeRobotAdapterConfig):
    """pi0: PaliGemma prefix (SigLIP images + language), a Gemma action expert whose suffix is a state
    token followed by H action tokens fused with the flow time by an MLP.

    ``tokenizer_path`` must be a LOCAL folder with the PaliGemma tokenizer (``AutoTokenizer`` files; the
    released policies tokenise with ``google/paligemma-3b-pt-224``). ``pretrained_path`` is an optional local
    LeRobot pi0 checkpoint folder (``config.json`` + ``model.safetensors``) whose weights are loaded.
    """

    TYPES: ClassVar[tuple[str, ...]] = ("pi0",)

    type: str = "pi0"
    tokenizer_path: str = ""  # local PaliGemma tokenizer folder
    paligemma_variant: str = "gemma_2b"  # LeRobot's names; ``vlm`` / ``expert`` override their sizes
    action_expert_variant: str = "gemma_300m"
    vlm: GemmaSize | None = None
    expert: GemmaSize | None = None
    vision: SiglipSize = field(default_factory=SiglipSize)
    vocab_size: int = 257152
    dtype: str = "float32"  # LeRobot's precision: float32 | bfloat16
    freeze_vision_encoder: bool = False  # LeRobot's pi0 defaults
    train_expert_only: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        self.vlm, self.expert = _as(GemmaSize, self.vlm), _as(GemmaSize, self.expert)
        self.vision = _as(SiglipSize, self.vision)
        if not self.tokenizer_path:
            raise ValueError(
                "tokenizer_path: give a local PaliGemma tokenizer folder (nothing is downloaded)"
            )
        for name in ("paligemma_variant", "action_expert_variant"):
            if getattr(self, name) not in GEMMA_VARIANTS:
                raise ValueError(f"{name}={getattr(self, name)!r}: one of {sorted(GEMMA_VARIANTS)}")
        vlm, expert = self.vlm_size(), self.expert_size()
        shared = ("depth", "num_heads", "num_kv_heads", "head_dim")  # the two attend jointly, layer by layer
        if any(getattr(vlm, n) != getattr(expert, n) for n in shared) or vlm.num_heads != JOINT_HEADS:
            raise ValueError(
                f"vlm={vlm} and expert={expert} must share {shared}, with num_heads={JOINT_HEADS} "
                "(LeRobot's joint attention reshapes to 8 heads)"
            )
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype={self.dtype!r}: float32 or bfloat16")
        if self.image_size[0] != self.image_size[1]:
            raise ValueError(f"image_size={self.image_size}: PaliGemma needs a square image")
        if self.image_size[0] % self.vision.patch_size:
            raise ValueError(
                f"image_size={self.image_size} is not a multiple of patch_size={self.vision.patch_size}"
            )

    def vlm_size(self) -> GemmaSize:
        return self.vlm or GEMMA_VARIANTS[self.paligemma_variant]

    def expert_size(self) -> GemmaSize:
        return self.expert or GEMMA_VARIANTS[self.action_expert_variant]

    def lerobot_kwargs(self) -> dict[str, Any]:
        """The ``PI0Config`` / ``PI05Config`` fields the network reads (CPU, no compile, no RTC inside)."""
        return dict(
            paligemma_variant=self.paligemma_variant,
            action_expert_variant=self.action_expert_variant,
            dtype=self.dtype,
            chunk_size=self.chunk_size,
            n_action_steps=self.n_action_steps,
            max_state_dim=self.max_state_dim,
            max_action_dim=self.max_action_dim,
            **{theirs: getattr(self, ours) for ours, theirs in LEROBOT_NAMES.items()},
            min_period=self.min_period,
            max_period=self.max_period,
            image_resolution=tuple(self.image_size),
            tokenizer_max_length=self.tokenizer_max_length,
            freeze_vision_encoder=self.freeze_vision_encoder,
            train_expert_only=self.train_expert_only,
            compile_model=False,
            device="cpu",
        )

    @classmethod
    def _lerobot_fields(cls, lr: dict[str, Any]) -> dict[str, Any]:
        kwargs = super()._lerobot_fields(lr)
        kwargs.update({ours: lr[theirs] for ours, theirs in LEROBOT_NAMES.items() if theirs in lr})
        if "image_resolution" in lr:
            kwargs["image_size"] = list(lr["image_resolution"])
        return kwargs

    def sizes(self) -> dict[str, Any]:
        return {
            "vlm": asdict(self.vlm_size()),
            "expert": asdict(self.expert_size()),
            "vision": asdict(self.vision),
        }


@dataclass
class PI05AdapterConfig(PI0AdapterConfig):
    """pi0.5: as pi0, but the state is discretised into the prompt (256 bins of the normalised state), the
    expert's time conditioning is adaRMS (no state token), and state/action use quantile normalisation."""

    TYPES: ClassVar[tuple[str, ...]] = ("pi05",)

    type: str = "pi05"
    tokenizer_max_length: int = 200
    state_norm: str = "quantiles"
    action_norm: str = "quantiles"
