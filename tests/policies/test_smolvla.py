"""SmolVLA adapter: protocol, training, sampling, the indicator / CFG path, checkpoints, LeRobot parity.

Everything runs offline on a tiny SmolVLM backbone built by the test (``tiny_smolvlm.py``).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pathlib import Path

import pytest
import torch
from tiny_smolvlm import make_batch, make_tiny_smolvla, save_lerobot_smolvla

from policies.smolvla import SmolVLAAdapter, SmolVLAAdapterConfig
from vla.batch import repeat_batch
from vla.policy import POLICIES, Policy, load_policy

torch.set_num_threads(1)

H, A, S = 8, 4, 6
CAMS = ("front", "wrist")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("smolvla")  # holds the tiny backbone, built once per module


@pytest.fixture
def policy(root: Path) -> SmolVLAAdapter:
    torch.manual_seed(0)
    return make_tiny_smolvla(root, chunk_size=H, action_dim=A, state_dim=S, cameras=CAMS).eval()


def batch(b: int = 2, seed: int = 0) -> dict:
    return make_batch(b, chunk_size=H, action_dim=A, state_dim=S, cameras=CAMS, seed=seed)


def noise(b: int = 2, seed: int = 1) -> torch.Tensor:  # [B, H, A]
    return torch.randn(b, H, A, generator=torch.Generator().manual_seed(seed))


def randomise_indicator(policy: SmolVLAAdapter) -> None:
    with torch.no_grad():
        policy.model.indicator.weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(3))


def test_registered_tiny_and_protocol(policy: SmolVLAAdapter) -> None:
    assert POLICIES.get("smolvla") is SmolVLAAdapter and SmolVLAAdapter.config_class is SmolVLAAdapterConfig
    assert isinstance(policy, Policy)
    assert (policy.chunk_size, policy.action_dim) == (H, A)
    assert sum(p.numel() for p in policy.parameters()) < 5_000_000


def test_trains_two_steps_with_a_per_sample_loss(policy: SmolVLAAdapter) -> None:
    policy.train()
    trainable = {n: p for n, p in policy.named_parameters() if p.requires_grad}
    assert trainable and not any(n.startswith("model.vlm_with_expert.vlm.") for n in trainable)
    before = {n: p.detach().clone() for n, p in trainable.items()}
    opt = torch.optim.AdamW(trainable.values(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(2):
        loss = policy.loss(batch(), cond=torch.tensor([1, 0]), generator=g)
        assert loss.shape == (2,) and torch.isfinite(loss).all()
        opt.zero_grad()
        loss.mean().backward()
        opt.step()
    assert any(not torch.equal(before[n], p) for n, p in trainable.items())
    assert policy.model.indicator.weight.abs().sum() > 0  # the zero-initialised indicator learns


def test_loss_is_pinned_by_noise_and_time_and_masks_padding(policy: SmolVLAAdapter) -> None:
    b, n, tau = batch(), noise(), torch.tensor([0.3, 0.8])
    loss = policy.loss(b, noise=n, time=tau)
    assert torch.equal(loss, policy.loss(b, noise=n, time=tau))
    assert not torch.allclose(loss, policy.loss(b, noise=n, time=torch.tensor([0.6, 0.1])))
    padded = dict(b, action_is_pad=torch.arange(H).expand(2, H) >= 3)  # only steps 0..2 count
    changed = dict(padded, action=b["action"].clone())
    changed["action"][:, 3:] += 10.0  # padded steps: no effect on the loss
    assert torch.allclose(policy.loss(padded, noise=n, time=tau), policy.loss(changed, noise=n, time=tau))
    all_pad = dict(b, action_is_pad=torch.ones(2, H, dtype=torch.bool))
    assert torch.equal(policy.loss(all_pad, noise=n, time=tau), torch.zeros(2))


def test_sample_chunk_shape_and_pinned_noise(policy: SmolVLAAdapter) -> None:
    obs = batch()
    chunk = policy.sample_chunk(obs, noise=noise())
    assert chunk.shape == (2, H, A) and torch.isfinite(chunk).all()
    assert torch.equal(chunk, policy.sample_chunk(obs, noise=noise()))
    g1, g2 = (torch.Generator().manual_seed(5) for _ in range(2))
    assert torch.equal(policy.sample_chunk(obs, generator=g1), policy.sample_chunk(obs, generator=g2))
    assert not torch.allclose(chunk, policy.sample_chunk(obs, noise=noise(seed=2)))
    assert not torch.allclose(chunk, policy.sample_chunk(obs, noise=noise(), num_steps=2))


def test_several_samples_per_observation(policy: SmolVLAAdapter) -> None:
    """num_samples = m: the chunks of the observations repeated m times, in a row."""
    obs, n = batch(), noise(b=6)
    many = policy.sample_chunk(obs, noise=n, num_samples=3)
    assert many.shape == (6, H, A)
    torch.testing.assert_close(many, policy.sample_chunk(repeat_batch(obs, 3), noise=n))


def test_euler_loop_matches_lerobot_sample_actions(policy: SmolVLAAdapter) -> None:
    obs, n = batch(), noise()
    x = policy._inputs(obs)
    with torch.no_grad():
        theirs = policy.model.sample_actions(x.images, x.img_masks, x.tokens, x.token_mask, x.state, noise=n)
    assert torch.allclose(policy.sample_chunk(obs, noise=n), policy.normalizer.unnormalize("action", theirs))


def test_zero_initialised_indicator_changes_nothing(policy: SmolVLAAdapter) -> None:
    obs, n, pos = batch(), noise(), torch.ones(2, dtype=torch.long)
    plain = policy.sample_chunk(obs, noise=n)
    assert torch.equal(plain, policy.sample_chunk(obs, noise=n, cond=pos))
    assert torch.equal(plain, policy.sample_chunk(obs, noise=n, cond=pos, guidance=3.0))


def test_cfg(policy: SmolVLAAdapter) -> None:
    randomise_indicator(policy)
    obs, n, pos = batch(), noise(), torch.ones(2, dtype=torch.long)
    uncond = policy.sample_chunk(obs, noise=n)
    cond = policy.sample_chunk(obs, noise=n, cond=pos)
    assert not torch.allclose(uncond, cond, atol=1e-3)
    assert torch.allclose(policy.sample_chunk(obs, noise=n, cond=pos, guidance=1.0), cond, atol=1e-5)
    assert not torch.allclose(policy.sample_chunk(obs, noise=n, cond=pos, guidance=3.0), cond, atol=1e-3)
    # one Euler step is affine in v, so the chunk itself is the guided combination
    u1, c1 = (policy.sample_chunk(obs, noise=n, cond=c, num_steps=1) for c in (None, pos))
    g1 = policy.sample_chunk(obs, noise=n, cond=pos, guidance=3.0, num_steps=1)
    assert torch.allclose(g1, u1 + 3.0 * (c1 - u1), atol=1e-4)
    with pytest.raises(ValueError, match="0/1"):
        policy.sample_chunk(obs, cond=torch.tensor([1, 2]))


def test_indicator_dropout_only_in_training(policy: SmolVLAAdapter) -> None:
    randomise_indicator(policy)
    b, n, tau, pos = batch(), noise(), torch.tensor([0.3, 0.8]), torch.ones(2, dtype=torch.long)
    unconditioned = policy.loss(b, noise=n, time=tau)
    conditioned = policy.loss(b, noise=n, time=tau, cond=pos)
    assert not torch.allclose(unconditioned, conditioned)
    policy.train()
    policy.config.cond_dropout = 1.0
    assert torch.allclose(policy.loss(b, noise=n, time=tau, cond=pos), unconditioned)
    policy.config.cond_dropout = 0.0
    assert torch.allclose(policy.loss(b, noise=n, time=tau, cond=pos), conditioned)


def test_save_load_round_trip(policy: SmolVLAAdapter, tmp_path: Path) -> None:
    randomise_indicator(policy)
    obs, n, pos = batch(), noise(), torch.ones(2, dtype=torch.long)
    expected = policy.sample_chunk(obs, noise=n, cond=pos, guidance=2.0)
    ckpt = policy.save(tmp_path / "ckpt")
    assert (ckpt / "backbone" / "tokenizer.json").is_file() and not list(ckpt.glob("backbone/*.safetensors"))
    loaded = load_policy(ckpt)
    assert isinstance(loaded, SmolVLAAdapter) and Path(loaded.config.vlm_model_name) == ckpt / "backbone"
    assert torch.equal(loaded.sample_chunk(obs, noise=n, cond=pos, guidance=2.0), expected)
    loaded.save(ckpt)  # re-saving over the folder it was loaded from keeps its backbone files
    assert torch.equal(SmolVLAAdapter.load(ckpt).sample_chunk(obs, noise=n, cond=pos, guidance=2.0), expected)


def test_from_lerobot_pretrained_matches_lerobot(root: Path, tmp_path: Path) -> None:
    theirs, pre, post = save_lerobot_smolvla(tmp_path / "lerobot", root / "tiny_smolvlm")
    ours = SmolVLAAdapter.from_lerobot_pretrained(tmp_path / "lerobot")
    assert ours.config.cameras == ["front"] and (ours.action_dim, ours.config.max_action_dim) == (A, 6)
    b = make_batch(2, chunk_size=H, action_dim=A, state_dim=S, cameras=("front",), seed=4)
    b["action_is_pad"][0, 5:] = True
    n = torch.randn(2, H, 6, generator=torch.Generator().manual_seed(2))  # LeRobot's [B, H, max_action_dim]
    obs = {k: v for k, v in b.items() if k not in ("action", "action_is_pad")}
    expected = post(theirs.predict_action_chunk(pre(dict(obs)), noise=n))
    assert torch.allclose(ours.sample_chunk(obs, noise=n), expected, atol=1e-5)
    t = torch.tensor([0.2, 0.7])  # LeRobot's flow time (1 = noise) is 1 - ours
    their_loss, _ = theirs.forward(pre(dict(b)), noise=n, time=t, reduction="none")
    assert torch.allclose(ours.loss(b, noise=n, time=1.0 - t), their_loss, atol=1e-5)
    (tmp_path / "lerobot" / "policy_preprocessor_step_5_normalizer_processor.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="stats="):
        SmolVLAAdapter.from_lerobot_pretrained(tmp_path / "lerobot")


def test_learns_two_fixed_samples(root: Path) -> None:
    torch.manual_seed(0)
    policy = make_tiny_smolvla(root, chunk_size=H, action_dim=A, state_dim=S, cameras=("front",)).train()
    b = make_batch(2, chunk_size=H, action_dim=A, state_dim=S, cameras=("front",), seed=7)
    obs = {k: v for k, v in b.items() if k != "action"}

    def sample_error() -> float:
        chunk = policy.sample_chunk(obs, generator=torch.Generator().manual_seed(1), num_steps=10)
        return (chunk - b["action"]).abs().mean().item()

    error_before = sample_error()
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-2)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(150):
        loss = policy.loss(b, generator=g).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert last < 0.5 * first, (first, last)
    assert sample_error() < 0.5 * error_before


def test_inputs_and_config_are_checked(policy: SmolVLAAdapter, root: Path) -> None:
    obs = batch()
    del obs["observation.images.wrist"]
    with pytest.raises(KeyError, match=r"observation\.images\.wrist"):
        policy.sample_chunk(obs)
    with pytest.raises(ValueError, match="noise"):
        policy.sample_chunk(batch(), noise=torch.zeros(2, H, A + 1))
    folder = str(root / "tiny_smolvlm")
    for bad in (
        dict(action_dim=40),
        dict(n_action_steps=60),
        dict(cameras=[]),
        dict(cond_dropout=1.5),
        dict(action_norm="unit"),
        dict(vlm_model_name=""),
    ):
        with pytest.raises(ValueError):
            SmolVLAAdapterConfig(**{"vlm_model_name": folder, **bad})
    with pytest.raises(FileNotFoundError, match="local SmolVLM folder"):
        SmolVLAAdapter(SmolVLAAdapterConfig(vlm_model_name=str(root / "nowhere")))


def test_rtc_keeps_the_frozen_prefix(policy: SmolVLAAdapter) -> None:
    """Real-time chunking through the one integrator: the committed actions are (nearly) reproduced, the
    chunk's tail stays the policy's own."""
    obs, n = batch(), noise()
    free = policy.sample_chunk(obs, noise=n)
    prev = free[:, :6] + 0.8  # a committed prefix the policy would not produce on its own
    guided = policy.sample_chunk(obs, noise=n, prefix=prev, prefix_delay=3)
    assert guided.shape == free.shape and torch.isfinite(guided).all()
    err_frozen = (guided[:, :3] - prev[:, :3]).abs().mean()
    assert err_frozen < 0.2 * (free[:, :3] - prev[:, :3]).abs().mean()
    assert (guided[:, 6:] - free[:, 6:]).abs().mean() < (guided[:, :3] - free[:, :3]).abs().mean()
    with pytest.raises(ValueError, match="prefix of shape"):
        policy.sample_chunk(obs, prefix=torch.zeros(2, 4, A + 1))
