"""Configuration of our compact flow-matching VLA (every constant a field; validated on construction)."""

from __future__ import annotations

from dataclasses import dataclass, field

from vla.flow import INTEGRATORS, RTC_SCHEDULES


@dataclass
class FlowMatchingConfig:
    """Images + proprio state + instruction -> a chunk of H actions, by K-step flow-matching ODE sampling.

    Vision: ``vision="cnn"`` (a small CNN per camera, trained from scratch) or ``"hf:<local folder>"`` (a
    pretrained transformers vision model, e.g. a ViT/SigLIP folder; loaded with ``local_files_only``).
    Language: ``tokenizer="byte"`` (UTF-8 bytes, nothing to download or save) or ``"hf:<local folder>"``.
    """

    type: str = "flow_matching"
    cameras: list[str] = field(default_factory=lambda: ["agentview", "wrist"])
    image_size: list[int] = field(default_factory=lambda: [96, 96])  # H, W
    state_dim: int = 8
    action_dim: int = 8
    chunk_size: int = 50  # H
    num_steps: int = 10  # K integration steps
    integrator: str = "euler"  # vla.flow.INTEGRATORS: euler, diffusers_euler, diffusers_heun
    # prefix (vision-language-proprio) transformer
    d_model: int = 256
    n_heads: int = 4
    n_prefix_layers: int = 4
    vision: str = "cnn"
    cnn_channels: list[int] = field(default_factory=lambda: [32, 64, 128])
    keypoints: int = 0  # spatial-softmax keypoint tokens per camera (0 = off; CNN only)
    tokenizer: str = "byte"
    max_text_len: int = 48
    # action expert
    d_expert: int = 128
    n_expert_heads: int = 4
    n_expert_layers: int = 3
    mlp_ratio: float = 4.0
    dropout: float = 0.0
    # flow matching (pi0): tau = 1 - (eps + (1 - eps) s), s ~ Beta(a, b); tau = 0 noise, tau = 1 data
    time_beta_a: float = 1.5
    time_beta_b: float = 1.0
    time_eps: float = 0.001
    # advantage indicator (RECAP): dropped with this probability in training (CFG training)
    cond_dropout: float = 0.3
    # what deployment conditions on unless told otherwise (RECAP post-training sets 1; CFG scale beta)
    inference_cond: int | None = None
    inference_guidance: float | None = None
    # CFG only for flow times tau in [lo, hi) (Kynkaanniemi et al. 2024, guidance in a limited interval);
    # the other steps run the conditioned expert alone. [0, 1]: every step.
    guidance_interval: tuple[float, float] = (0.0, 1.0)
    # real-time chunking (prefix inpainting at sampling): max guidance weight and the prefix weight decay
    rtc_beta_max: float = 10.0
    rtc_schedule: str = "exp"  # vla.flow.RTC_SCHEDULES: exp, linear, ones, zeros
    # normalisation of state / action with the dataset stats stored in the checkpoint
    state_norm: str = "mean_std"
    action_norm: str = "mean_std"

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads or self.d_expert % self.n_expert_heads:
            raise ValueError("d_model / d_expert must be divisible by their head counts")
        if self.chunk_size < 1 or self.num_steps < 1:
            raise ValueError(f"chunk_size={self.chunk_size} and num_steps={self.num_steps} must be >= 1")
        if self.integrator not in INTEGRATORS:
            raise ValueError(f"integrator={self.integrator!r}: use one of {', '.join(INTEGRATORS)}")
        if self.rtc_schedule not in RTC_SCHEDULES:
            raise ValueError(f"rtc_schedule={self.rtc_schedule!r}: use one of {', '.join(RTC_SCHEDULES)}")
        if not (self.vision == "cnn" or self.vision.startswith("hf:")):
            raise ValueError(f"vision={self.vision!r}: use 'cnn' or 'hf:<local folder>'")
        if not (self.tokenizer == "byte" or self.tokenizer.startswith("hf:")):
            raise ValueError(f"tokenizer={self.tokenizer!r}: use 'byte' or 'hf:<local folder>'")
        if not 0.0 <= self.cond_dropout <= 1.0:
            raise ValueError(f"cond_dropout={self.cond_dropout} not in [0, 1]")
        lo, hi = self.guidance_interval
        if not 0.0 <= lo <= hi <= 1.0:
            raise ValueError(f"guidance_interval={self.guidance_interval}: need 0 <= lo <= hi <= 1")
        if self.keypoints < 0:
            raise ValueError(f"keypoints={self.keypoints} must be >= 0")
        if self.inference_cond not in (None, 0, 1):
            raise ValueError(f"inference_cond={self.inference_cond} must be 0, 1 or null")
        if len(self.image_size) != 2:  # cameras may be empty: a state-only policy (state + instruction)
            raise ValueError("image_size must be [H, W]")


def debug_config(**overrides) -> FlowMatchingConfig:
    """A tiny preset that trains a few steps in seconds on a CPU (tests, ``experiment=debug``)."""
    base = dict(
        image_size=[32, 32],
        chunk_size=8,
        num_steps=4,
        d_model=64,
        n_heads=2,
        n_prefix_layers=1,
        d_expert=48,
        n_expert_heads=2,
        n_expert_layers=1,
        cnn_channels=[8, 16, 32],
        max_text_len=24,
    )
    base.update(overrides)
    return FlowMatchingConfig(**base)
