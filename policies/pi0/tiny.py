"""A tiny pi0 / pi0.5 adapter built offline (tests, benchmarks).

Nothing is downloaded: the tokenizer is a byte-level BPE trained on a few instructions and pi0.5-style state
prompts (saved with ``save_pretrained`` as a local tokenizer folder, as a user would save PaliGemma's), and
the network LeRobot's ``PI0Pytorch`` / ``PI05Pytorch`` at toy sizes: a 2-layer, 64-wide Gemma prefix, a
2-layer, 32-wide Gemma expert, a 1-layer, 32-wide SigLIP tower on 32x32 images (16 image tokens per camera).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from policies.pi0.config import GemmaSize, PI0AdapterConfig, PI05AdapterConfig, SiglipSize
from policies.pi0.policy import PI0Adapter, PI05Adapter
from policies.smolvla.tiny import TINY_TASKS, tiny_stats
from policies.tiny_tokenizer import train_tiny_tokenizer

# the two transformers attend jointly, so they share heads (LeRobot's joint attention assumes 8) and head_dim
TINY_VLM = GemmaSize(width=64, depth=2, mlp_dim=128, num_heads=8, num_kv_heads=1, head_dim=8)
TINY_EXPERT = GemmaSize(width=32, depth=2, mlp_dim=64, num_heads=8, num_kv_heads=1, head_dim=8)
TINY_VISION = SiglipSize(
    hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, patch_size=8
)


def build_tiny_paligemma_tokenizer(folder: str | Path, texts: Sequence[str] = TINY_TASKS) -> Path:
    """Writes a small tokenizer folder with PaliGemma's special tokens (``<pad>``, ``<eos>``, ``<bos>``)."""
    prompts = [
        f"Task: {t}, State: {' '.join(str(i) for i in range(k, 256, 17))};\nAction: "
        for k, t in enumerate(texts)
    ]
    tokenizer = train_tiny_tokenizer(
        [*texts, *prompts],
        ["<pad>", "<eos>", "<bos>", "<unk>"],
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
    )
    folder = Path(folder)
    tokenizer.save_pretrained(folder)
    return folder


def make_tiny_pi0(
    tmp_dir: str | Path,
    *,
    variant: str = "pi0",
    chunk_size: int = 8,
    action_dim: int = 4,
    state_dim: int = 6,
    cameras: Sequence[str] = ("front",),
    image_size: int = 32,
    **overrides: object,
) -> PI0Adapter:
    """A tiny pi0 (``variant="pi0"``) or pi0.5 (``"pi05"``) adapter on a tokenizer written under
    ``tmp_dir/tiny_paligemma_tokenizer`` (reused when already there). ``overrides`` go to the config."""
    folder = Path(tmp_dir) / "tiny_paligemma_tokenizer"
    if not (folder / "tokenizer.json").is_file():
        build_tiny_paligemma_tokenizer(folder)
    cls, cfg_cls = {"pi0": (PI0Adapter, PI0AdapterConfig), "pi05": (PI05Adapter, PI05AdapterConfig)}[variant]
    cfg = dict(
        tokenizer_path=str(folder),
        vlm=TINY_VLM,
        expert=TINY_EXPERT,
        vision=TINY_VISION,
        vocab_size=384,
        cameras=list(cameras),
        image_size=[image_size, image_size],
        state_dim=state_dim,
        action_dim=action_dim,
        max_state_dim=state_dim,
        max_action_dim=action_dim,
        chunk_size=chunk_size,
        n_action_steps=chunk_size,
        num_steps=4,
        tokenizer_max_length=48 if variant == "pi0" else 64,
    )
    cfg.update(overrides)
    return cls(cfg_cls(**cfg), tiny_stats(state_dim, action_dim))


def tiny_size_overrides() -> list[str]:
    """The ``vla-train`` overrides that build pi0/pi0.5 at the toy sizes above: LeRobot's configs can only
    name the released sizes, so a tiny one reaches ``policy=pi05`` (or ``pi0``) as Hydra dicts."""

    def spelled(size: GemmaSize | SiglipSize) -> str:
        return "{" + ",".join(f"{k}:{v}" for k, v in asdict(size).items()) + "}"

    return [
        f"policy.vlm={spelled(TINY_VLM)}",
        f"policy.expert={spelled(TINY_EXPERT)}",
        f"policy.vision={spelled(TINY_VISION)}",
        "policy.vocab_size=384",
    ]
