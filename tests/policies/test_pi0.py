"""pi0 / pi0.5 adapters: protocol, training, sampling against LeRobot's own sampler, the indicator / CFG path,
RTC, checkpoints, and loading a LeRobot-format checkpoint folder.

Everything runs offline on tiny networks built by ``policies/pi0/tiny.py`` (LeRobot's PI0Pytorch /
PI05Pytorch modules at toy sizes, a tokenizer trained on a few strings).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from tiny_smolvlm import make_batch

from policies.pi0 import PI0Adapter, PI0AdapterConfig, PI05Adapter, PI05AdapterConfig
from policies.pi0.tiny import TINY_EXPERT, TINY_VISION, TINY_VLM, make_tiny_pi0
from policies.smolvla.tiny import tiny_stats
from vla.policy import POLICIES, Policy, load_policy

torch.set_num_threads(1)

H, A, S = 8, 4, 6
CAMS = ("front", "wrist")
VARIANTS = ("pi0", "pi05")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pi0")  # holds the tiny tokenizer, built once per module


@pytest.fixture(params=VARIANTS)
def policy(request: pytest.FixtureRequest, root: Path) -> PI0Adapter:
    torch.manual_seed(0)
    return make_tiny_pi0(
        root, variant=request.param, chunk_size=H, action_dim=A, state_dim=S, cameras=CAMS
    ).eval()


def batch(b: int = 2, seed: int = 0, cameras: tuple[str, ...] = CAMS) -> dict:
    return make_batch(b, chunk_size=H, action_dim=A, state_dim=S, cameras=cameras, seed=seed)


def noise(b: int = 2, seed: int = 1) -> torch.Tensor:  # [B, H, A]
    return torch.randn(b, H, A, generator=torch.Generator().manual_seed(seed))


def randomise_indicator(policy: PI0Adapter) -> None:
    with torch.no_grad():
        policy.model.indicator.weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(3))


def test_registered_tiny_and_protocol(policy: PI0Adapter) -> None:
    assert POLICIES.get("pi0") is PI0Adapter and POLICIES.get("pi05") is PI05Adapter
    assert isinstance(policy, Policy) and (policy.chunk_size, policy.action_dim) == (H, A)
    assert sum(p.numel() for p in policy.parameters()) < 1_000_000
    expected = {"pi0": ("mean_std", 48), "pi05": ("quantiles", 200)}[policy.config.type]
    cfg_cls = {"pi0": PI0AdapterConfig, "pi05": PI05AdapterConfig}[policy.config.type]
    defaults = cfg_cls(tokenizer_path="x")
    assert (defaults.action_norm, defaults.tokenizer_max_length) == expected  # LeRobot's defaults
    assert defaults.vlm_size().width == 2048 and defaults.expert_size().width == 1024  # released sizes


def test_trains_two_steps_with_a_per_sample_loss(policy: PI0Adapter) -> None:
    policy.train()
    trainable = {n: p for n, p in policy.named_parameters() if p.requires_grad}
    before = {n: p.detach().clone() for n, p in trainable.items()}
    opt = torch.optim.AdamW(trainable.values(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(2):
        loss = policy.loss(batch(), cond=torch.tensor([1, 0]), generator=g)
        assert loss.shape == (2,) and torch.isfinite(loss).all()
        opt.zero_grad()
        loss.mean().backward()
        opt.step()
    changed = {n for n, p in trainable.items() if not torch.equal(before[n], p)}
    assert any(n.startswith("model.paligemma_with_expert.gemma_expert.") for n in changed)
    assert policy.model.indicator.weight.abs().sum() > 0  # the zero-initialised indicator learns


def test_loss_matches_lerobot_forward_and_masks_padding(policy: PI0Adapter) -> None:
    b, n, tau = batch(), noise(), torch.tensor([0.3, 0.8])
    loss = policy.loss(b, noise=n, time=tau)
    x = policy._inputs(b)
    actions = policy.normalizer.normalize("action", b["action"])
    with torch.no_grad():  # LeRobot's own forward, reduced as LeRobot's reduction="none"
        args = (x.state,) if policy.config.type == "pi0" else ()
        theirs = policy.model(x.images, x.img_masks, x.tokens, x.token_mask, *args, actions, n, 1.0 - tau)
    assert torch.allclose(loss, theirs.mean(dim=(1, 2)), atol=1e-6)
    assert not torch.allclose(loss, policy.loss(b, noise=n, time=torch.tensor([0.6, 0.1])))
    # padded steps leave the loss (they still enter x_t: pi0's action tokens attend to each other)
    padded = dict(b, action_is_pad=torch.arange(H).expand(2, H) >= 3)
    assert torch.allclose(policy.loss(padded, noise=n, time=tau), theirs[:, :3].mean(dim=(1, 2)), atol=1e-6)


def test_euler_loop_matches_lerobot_sample_actions(policy: PI0Adapter) -> None:
    obs, n = batch(), noise()
    x = policy._inputs(obs)
    args = (x.state,) if policy.config.type == "pi0" else ()
    theirs = policy.model.sample_actions(x.images, x.img_masks, x.tokens, x.token_mask, *args, noise=n)
    chunk = policy.sample_chunk(obs, noise=n)
    assert chunk.shape == (2, H, A) and torch.isfinite(chunk).all()
    assert torch.allclose(chunk, policy.normalizer.unnormalize("action", theirs), atol=1e-5)
    assert torch.equal(chunk, policy.sample_chunk(obs, noise=n))
    g1, g2 = (torch.Generator().manual_seed(5) for _ in range(2))
    assert torch.equal(policy.sample_chunk(obs, generator=g1), policy.sample_chunk(obs, generator=g2))
    assert not torch.allclose(chunk, policy.sample_chunk(obs, noise=noise(seed=2)))


def test_prompt_and_state(policy: PI0Adapter) -> None:
    """pi0: the state is a suffix token; pi0.5: it is written into the prompt as 256 bins."""
    obs = batch()
    text = policy.tokenizer.decode(policy._inputs(obs).tokens[0], skip_special_tokens=True)
    moved = dict(obs, **{"observation.state": obs["observation.state"] + 0.7})
    if policy.config.type == "pi05":
        assert text.startswith(f"Task: {obs['task'][0]}, State: ") and text.endswith(";\nAction: ")
        assert not torch.equal(policy._inputs(obs).tokens, policy._inputs(moved).tokens)
    else:
        assert text == f"{obs['task'][0]}\n"
        assert torch.equal(policy._inputs(obs).tokens, policy._inputs(moved).tokens)
    assert not torch.allclose(
        policy.sample_chunk(obs, noise=noise()), policy.sample_chunk(moved, noise=noise())
    )


def test_indicator_and_cfg(policy: PI0Adapter) -> None:
    obs, n, pos = batch(), noise(), torch.ones(2, dtype=torch.long)
    plain = policy.sample_chunk(obs, noise=n)
    assert torch.equal(plain, policy.sample_chunk(obs, noise=n, cond=pos, guidance=3.0))  # zero-initialised
    randomise_indicator(policy)
    cond = policy.sample_chunk(obs, noise=n, cond=pos)
    assert not torch.allclose(plain, cond, atol=1e-3)
    assert torch.allclose(policy.sample_chunk(obs, noise=n, cond=pos, guidance=1.0), cond, atol=1e-5)
    u1, c1 = (policy.sample_chunk(obs, noise=n, cond=c, num_steps=1) for c in (None, pos))
    g1 = policy.sample_chunk(obs, noise=n, cond=pos, guidance=3.0, num_steps=1)
    assert torch.allclose(g1, u1 + 3.0 * (c1 - u1), atol=1e-4)  # one Euler step is affine in v


def test_rtc_keeps_the_frozen_prefix(policy: PI0Adapter) -> None:
    obs, n = batch(), noise()
    free = policy.sample_chunk(obs, noise=n)
    prev = free[:, :6] + 0.8
    guided = policy.sample_chunk(obs, noise=n, prefix=prev, prefix_delay=3)
    assert (guided[:, :3] - prev[:, :3]).abs().mean() < 0.2 * (free[:, :3] - prev[:, :3]).abs().mean()
    assert (guided[:, 6:] - free[:, 6:]).abs().mean() < (guided[:, :3] - free[:, :3]).abs().mean()


def test_save_load_round_trip(policy: PI0Adapter, tmp_path: Path) -> None:
    randomise_indicator(policy)
    obs, n, pos = batch(), noise(), torch.ones(2, dtype=torch.long)
    expected = policy.sample_chunk(obs, noise=n, cond=pos, guidance=2.0)
    ckpt = policy.save(tmp_path / "ckpt")
    assert (ckpt / "tokenizer" / "tokenizer.json").is_file()
    loaded = load_policy(ckpt)
    assert type(loaded) is type(policy) and Path(loaded.config.tokenizer_path) == ckpt / "tokenizer"
    assert loaded.config.vlm == TINY_VLM and loaded.config.vision == TINY_VISION
    assert torch.equal(loaded.sample_chunk(obs, noise=n, cond=pos, guidance=2.0), expected)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("layout", ["lerobot", "openpi"])
def test_from_lerobot_pretrained(variant: str, layout: str, root: Path, tmp_path: Path) -> None:
    """A LeRobot-format folder (its own config class writes config.json; weights keyed ``model.*``, or the
    older openpi layout without the prefix and with pi0's ``time_mlp_*`` names) loads weight for weight."""
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.pi0.configuration_pi0 import PI0Config
    from lerobot.policies.pi05.configuration_pi05 import PI05Config

    torch.manual_seed(1)
    source = make_tiny_pi0(root, variant=variant, chunk_size=H, action_dim=A, state_dim=S).eval()
    folder = tmp_path / "lerobot"
    folder.mkdir()
    cfg_cls = {"pi0": PI0Config, "pi05": PI05Config}[variant]
    cfg_cls(
        input_features={
            "observation.images.front": PolicyFeature(type=FeatureType.VISUAL, shape=(3, 32, 32)),
            "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(S,)),
        },
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(A,))},
        chunk_size=H,
        n_action_steps=H,
        max_state_dim=S,
        max_action_dim=A,
        image_resolution=(32, 32),
        num_inference_steps=4,
        tokenizer_max_length=source.config.tokenizer_max_length,
        device="cpu",
    )._save_pretrained(folder)
    weights = {k: v.clone() for k, v in source.model.state_dict().items() if not k.startswith("indicator.")}
    if layout == "openpi":
        weights = {k.replace("action_time_mlp_", "time_mlp_"): v for k, v in weights.items()}
    else:
        weights = {f"model.{k}": v for k, v in weights.items()}
    save_file(weights, str(folder / "model.safetensors"))
    stats = {
        f"{k}.{s}": torch.as_tensor(v).float() for k, d in tiny_stats(S, A).items() for s, v in d.items()
    }
    save_file(stats, str(folder / "policy_preprocessor_step_3_normalizer_processor.safetensors"))
    assert json.loads((folder / "config.json").read_text())["type"] == variant

    cls = {"pi0": PI0Adapter, "pi05": PI05Adapter}[variant]
    sizes = dict(vlm=TINY_VLM, expert=TINY_EXPERT, vision=TINY_VISION, vocab_size=384)
    ours = cls.from_lerobot_pretrained(folder, tokenizer_path=str(root / "tiny_paligemma_tokenizer"), **sizes)
    assert ours.config.cameras == ["front"] and ours.config.num_steps == 4
    assert ours.config.action_norm == {"pi0": "mean_std", "pi05": "quantiles"}[variant]
    obs = {k: v for k, v in batch(cameras=("front",)).items() if k not in ("action", "action_is_pad")}
    assert torch.allclose(
        ours.eval().sample_chunk(obs, noise=noise()), source.sample_chunk(obs, noise=noise())
    )
    other = {"pi0": "pi05", "pi05": "pi0"}[variant]
    with pytest.raises(ValueError, match="type"):
        POLICIES.get(other).from_lerobot_pretrained(folder, tokenizer_path="x", **sizes)


def test_learns_two_fixed_samples(root: Path) -> None:
    torch.manual_seed(0)
    policy = make_tiny_pi0(root, variant="pi0", chunk_size=H, action_dim=A, state_dim=S).train()
    b = batch(cameras=("front",), seed=7)
    obs = {k: v for k, v in b.items() if k != "action"}

    def sample_error() -> float:
        chunk = policy.sample_chunk(obs, generator=torch.Generator().manual_seed(1), num_steps=10)
        return (chunk - b["action"]).abs().mean().item()

    error_before = sample_error()
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-2)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(250):
        loss = policy.loss(b, generator=g).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert last < 0.5 * first, (first, last)
    assert sample_error() < 0.5 * error_before


def test_config_is_checked(root: Path) -> None:
    tok = str(root / "tiny_paligemma_tokenizer")
    sizes = dict(vlm=TINY_VLM, expert=TINY_EXPERT, vision=TINY_VISION)
    for bad in (
        dict(tokenizer_path=""),
        dict(image_size=[32, 48]),  # PaliGemma: square
        dict(image_size=[36, 36]),  # not a multiple of the patch
        dict(expert={**TINY_EXPERT.__dict__, "head_dim": 16}),  # joint attention: shared head_dim
        dict(paligemma_variant="gemma_7b", vlm=None),
        dict(dtype="float16"),
        dict(type="pi05"),
    ):
        with pytest.raises(ValueError):
            PI0AdapterConfig(**{"tokenizer_path": tok, **sizes, "image_size": [32, 32], **bad})
    with pytest.raises(FileNotFoundError, match="local tokenizer folder"):
        PI0Adapter(PI0AdapterConfig(tokenizer_path=str(root / "nowhere"), **sizes, image_size=[32, 32]))
