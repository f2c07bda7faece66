"""A tiny SmolVLM backbone built offline, and a tiny SmolVLA adapter on it (tests, benchmarks).

Nothing is downloaded: the tokenizer is a byte-level BPE trained on a few instructions (plus the special
tokens the SmolVLM processor and SmolVLA read: ``<image>``, ``<fake_token_around_image>``, ``<global-img>``,
``<row_r_col_c>``, ``<end_of_utterance>``), the backbone a ``SmolVLMConfig`` with a 2-layer, 64-wide Llama
text model and a 1-layer, 32-wide vision tower, saved with ``save_pretrained`` (config, tokenizer and
processor; no weights, SmolVLA builds the VLM from the config when ``load_vlm_weights`` is False).

What SmolVLA reads from the backbone: ``text_config`` (hidden size, heads, kv heads, head_dim; the expert
copies it at ``expert_width_multiplier`` x the width with ``num_vlm_layers`` (or ``num_expert_layers``)
layers and a 256-multiple MLP), ``vision_config`` + ``scale_factor`` (image tokens per camera =
(image_size / patch_size)^2 / scale_factor^2), and the tokenizer's ``fake_image_token_id`` /
``global_image_token_id``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from policies.smolvla.config import SmolVLAAdapterConfig
from policies.smolvla.policy import SmolVLAAdapter
from policies.tiny_tokenizer import train_tiny_tokenizer
from vla.checkpoint import Stats

TINY_TASKS = (
    "pick up the red cube",
    "push the blue block to the left",
    "open the top drawer",
    "put the bowl on the plate",
    "stack the green cube on the red cube",
)
_SPECIAL = {
    "fake_image_token": "<fake_token_around_image>",
    "image_token": "<image>",
    "global_image_token": "<global-img>",
    "end_of_utterance_token": "<end_of_utterance>",
}


def build_tiny_smolvlm(
    folder: str | Path,
    *,
    image_size: int = 32,
    patch_size: int = 8,
    scale_factor: int = 2,
    text_hidden: int = 64,
    text_layers: int = 2,
    vision_hidden: int = 32,
    vision_layers: int = 1,
    texts: Sequence[str] = TINY_TASKS,
) -> Path:
    """Writes a tiny SmolVLM backbone folder (config + tokenizer + processor) and returns its path."""
    from transformers import SmolVLMConfig, SmolVLMImageProcessor, SmolVLMProcessor
    from transformers.models.smolvlm.video_processing_smolvlm import SmolVLMVideoProcessor

    if image_size % (patch_size * scale_factor):
        raise ValueError(f"image_size={image_size} must be a multiple of patch_size x scale_factor")
    folder = Path(folder)
    grid = [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]
    special = ["<pad>", "<|endoftext|>", "<|im_start|>", "<video>", *_SPECIAL.values(), *grid]
    tokenizer = train_tiny_tokenizer(
        texts,
        special,
        pad_token="<pad>",
        unk_token="<|endoftext|>",
        bos_token="<|im_start|>",
        eos_token="<end_of_utterance>",
        extra_special_tokens=dict(_SPECIAL),
    )
    size = {"longest_edge": image_size}
    processor = SmolVLMProcessor(
        SmolVLMImageProcessor(size=size, max_image_size=size, do_image_splitting=False),
        tokenizer,
        SmolVLMVideoProcessor(size=size, max_image_size=size),
        image_seq_len=(image_size // patch_size) ** 2 // scale_factor**2,
    )
    processor.save_pretrained(folder)
    heads = max(1, text_hidden // 16)
    config = SmolVLMConfig(
        vision_config=dict(
            hidden_size=vision_hidden,
            intermediate_size=2 * vision_hidden,
            num_hidden_layers=vision_layers,
            num_attention_heads=2,
            image_size=image_size,
            patch_size=patch_size,
        ),
        text_config=dict(
            model_type="llama",
            vocab_size=len(tokenizer),
            hidden_size=text_hidden,
            intermediate_size=2 * text_hidden,
            num_hidden_layers=text_layers,
            num_attention_heads=heads,
            num_key_value_heads=max(1, heads // 2),
            head_dim=16,
            max_position_embeddings=512,
            pad_token_id=tokenizer.pad_token_id,
        ),
        scale_factor=scale_factor,
        image_token_id=tokenizer.convert_tokens_to_ids(_SPECIAL["image_token"]),
        pad_token_id=tokenizer.pad_token_id,
    )
    config.save_pretrained(folder)
    return folder


def tiny_stats(state_dim: int, action_dim: int, seed: int = 0) -> Stats:
    """Non-trivial statistics (so normalisation is exercised) for a tiny adapter."""
    rng = np.random.default_rng(seed)

    def one(n: int) -> dict[str, np.ndarray]:
        mean, std = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
        lo, hi = mean - 2 * std, mean + 2 * std
        return {
            "mean": mean,
            "std": std,
            "min": lo,
            "max": hi,
            "q01": 0.9 * lo + 0.1 * mean,
            "q99": 0.9 * hi + 0.1 * mean,
        }

    return {"observation.state": one(state_dim), "action": one(action_dim)}


def make_tiny_smolvla(
    tmp_dir: str | Path,
    *,
    chunk_size: int = 8,
    action_dim: int = 4,
    state_dim: int = 6,
    cameras: Sequence[str] = ("front",),
    image_size: int = 32,
    stats: Stats | None = None,
    **overrides: object,
) -> SmolVLAAdapter:
    """A tiny SmolVLA adapter (~0.3M parameters) on a tiny backbone written under ``tmp_dir/tiny_smolvlm``
    (reused when already there). ``overrides`` go to :class:`SmolVLAAdapterConfig`."""
    folder = Path(tmp_dir) / "tiny_smolvlm"
    if not (folder / "config.json").is_file():
        build_tiny_smolvlm(folder, image_size=image_size)
    cfg = dict(
        vlm_model_name=str(folder),
        cameras=list(cameras),
        image_size=[image_size, image_size],
        state_dim=state_dim,
        action_dim=action_dim,
        max_state_dim=state_dim,
        max_action_dim=action_dim,
        chunk_size=chunk_size,
        n_action_steps=chunk_size,
        num_steps=4,
        num_vlm_layers=2,
        tokenizer_max_length=24,
    )
    cfg.update(overrides)
    return SmolVLAAdapter(SmolVLAAdapterConfig(**cfg), stats or tiny_stats(state_dim, action_dim))


def save_lerobot_smolvla(
    folder: Path,
    backbone: Path,
    *,
    chunk_size: int = 8,
    action_dim: int = 4,
    state_dim: int = 6,
    max_action_dim: int = 6,
    max_state_dim: int = 8,
    image_size: int = 32,
    cameras: Sequence[str] = ("front",),
) -> tuple[Any, Any, Any]:
    """Writes a tiny LeRobot SmolVLA folder as LeRobot does (policy + pre/post-processors with stats), for
    ``cameras`` (``observation.images.<camera>``), random weights.

    Padded state/action widths (``max_*_dim`` > the real ones) exercise the adapter's padding.
    Returns ``(policy, preprocessor, postprocessor)``.
    """
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy
    from lerobot.policies.smolvla.processor_smolvla import make_smolvla_pre_post_processors

    cfg = SmolVLAConfig(
        vlm_model_name=str(backbone),
        input_features={
            **{
                f"observation.images.{c}": PolicyFeature(
                    type=FeatureType.VISUAL, shape=(3, image_size, image_size)
                )
                for c in cameras
            },
            "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(state_dim,)),
        },
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(action_dim,))},
        chunk_size=chunk_size,
        n_action_steps=chunk_size,
        max_state_dim=max_state_dim,
        max_action_dim=max_action_dim,
        resize_imgs_with_padding=(image_size, image_size),
        num_vlm_layers=2,
        num_steps=4,
        tokenizer_max_length=24,
        device="cpu",
    )
    policy = SmolVLAPolicy(cfg)
    stats = {
        k: {s: torch.as_tensor(v, dtype=torch.float32) for s, v in d.items()}
        for k, d in tiny_stats(state_dim, action_dim).items()
    }
    pre, post = make_smolvla_pre_post_processors(cfg, stats)
    policy.save_pretrained(folder)
    pre.save_pretrained(folder)
    post.save_pretrained(folder)
    return policy, pre, post
