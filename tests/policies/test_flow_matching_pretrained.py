"""Pretrained parts loadable from local folders (no download): a vision backbone and a tokenizer."""

import torch

from policies.flow_matching import FlowMatchingPolicy, debug_config
from policies.smolvla.tiny import build_tiny_smolvlm
from vla.policy import load_policy

torch.set_num_threads(1)


def _obs(cfg, b=2):
    obs = {f"observation.images.{c}": torch.rand(b, 3, *cfg.image_size) for c in cfg.cameras}
    obs["observation.state"] = torch.randn(b, cfg.state_dim)
    obs["task"] = ["reach the red ball", "stack the red cube on the green cube"][:b]
    return obs


def test_hf_vision_backbone_and_tokenizer_from_local_folders(tmp_path):
    from transformers import ViTConfig, ViTModel

    vit = tmp_path / "vit"
    ViTModel(
        ViTConfig(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            image_size=32,
            patch_size=8,
        )
    ).save_pretrained(vit)
    tok = tmp_path / "smolvlm"
    build_tiny_smolvlm(tok)
    cfg = debug_config(vision=f"hf:{vit}", tokenizer=f"hf:{tok}")
    policy = FlowMatchingPolicy(cfg)
    batch = _obs(cfg)
    batch["action"] = torch.randn(2, cfg.chunk_size, cfg.action_dim)
    loss = policy.loss(batch)
    loss.mean().backward()
    assert loss.shape == (2,) and torch.isfinite(loss).all()
    assert (
        policy.model.vision["agentview"].backbone.embeddings.patch_embeddings.projection.weight.grad
        is not None
    )
    policy.eval().save(tmp_path / "ck")
    noise, obs = torch.randn(2, cfg.chunk_size, cfg.action_dim), _obs(cfg)
    again = load_policy(tmp_path / "ck")
    torch.testing.assert_close(again.sample_chunk(obs, noise=noise), policy.sample_chunk(obs, noise=noise))
