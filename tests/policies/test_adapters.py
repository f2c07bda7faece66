"""Contract tests over every registered LeRobot VLA adapter (each ``vla.policy.POLICIES`` entry that is a
:class:`LeRobotFlowAdapter`: SmolVLA, pi0, pi0.5): the protocol, the per-sample loss against LeRobot's own
forward, sampling against LeRobot's ``sample_actions``, pinned noise, the indicator and CFG, RTC, learning
two fixed samples, our checkpoint round trip, and a LeRobot-format folder the test writes.

Everything runs offline on tiny networks, each built once per module (``TINY`` says how; a registered adapter
without an entry there fails). What only one adapter does is tested in ``test_smolvla.py`` / ``test_pi0.py``.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import copy
import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from tiny_smolvlm import make_batch, make_tiny_smolvla

from policies.lerobot_adapter import LeRobotFlowAdapter
from policies.lerobot_checkpoint import save_lerobot_folder
from policies.pi0.tiny import make_tiny_pi0
from vla.batch import ACTION, IMAGE_PREFIX, STATE, repeat_batch
from vla.policy import POLICIES, Policy, load_policy

torch.set_num_threads(1)

H, A, S = 8, 4, 6
CAMS = ("front", "wrist")
SIZE = 32  # the tiny networks' square image size


def _pi_sizes(cfg: Any) -> dict[str, Any]:
    """What a LeRobot pi0 / pi0.5 ``config.json`` cannot say: the tiny sizes and the local tokenizer."""
    return {"tokenizer_path": cfg.tokenizer_path, "vocab_size": cfg.vocab_size, **cfg.sizes()}


@dataclasses.dataclass(frozen=True)
class Tiny:
    """How the tests build one registered adapter small, and load it back from a LeRobot folder."""

    build: Callable[[Path], LeRobotFlowAdapter]  # its asset folder (backbone / tokenizer) under the path
    lerobot_overrides: Callable[[Any], dict[str, Any]] = lambda cfg: {}  # fields a LeRobot config lacks


_SHAPES = dict(chunk_size=H, action_dim=A, state_dim=S, cameras=CAMS, image_size=SIZE)
TINY = {
    "smolvla": Tiny(lambda root: make_tiny_smolvla(root, **_SHAPES)),
    "pi0": Tiny(lambda root: make_tiny_pi0(root, variant="pi0", **_SHAPES), _pi_sizes),
    "pi05": Tiny(lambda root: make_tiny_pi0(root, variant="pi05", **_SHAPES), _pi_sizes),
}
ADAPTERS = [n for n in POLICIES.names() if issubclass(POLICIES.get(n), LeRobotFlowAdapter)]


@pytest.fixture(scope="module", params=ADAPTERS)
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """One tiny adapter per registered type, with its initial weights and config to restore before a test."""
    if request.param not in TINY:
        pytest.fail(f"adapter {request.param!r} is registered but has no tiny builder in TINY")
    torch.manual_seed(0)
    policy = TINY[request.param].build(tmp_path_factory.mktemp(request.param)).eval()
    return policy, copy.deepcopy(policy.state_dict()), copy.deepcopy(policy.config)


@pytest.fixture
def policy(built: tuple) -> LeRobotFlowAdapter:
    policy, state, config = built
    policy.load_state_dict(state)
    policy.config = copy.deepcopy(config)
    policy.zero_grad(set_to_none=True)
    return policy.eval()


def batch(b: int = 2, seed: int = 0) -> dict:
    return make_batch(b, chunk_size=H, action_dim=A, state_dim=S, cameras=CAMS, seed=seed)


def observation(b: dict) -> dict:
    return {k: v for k, v in b.items() if k not in (ACTION, "action_is_pad")}


def noise(b: int = 2, seed: int = 1) -> torch.Tensor:  # [B, H, A]
    return torch.randn(b, H, A, generator=torch.Generator().manual_seed(seed))


def randomise_indicator(policy: LeRobotFlowAdapter) -> None:
    with torch.no_grad():
        policy.model.indicator.weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(3))


def state_arg(policy: LeRobotFlowAdapter, x: Any) -> tuple:
    """The state as LeRobot's network takes it: an argument (SmolVLA, pi0) or none (pi0.5: in the prompt)."""
    return (x.state,) if "state" in inspect.signature(policy.model.sample_actions).parameters else ()


def test_every_adapter_is_enumerated() -> None:
    assert {"smolvla", "pi0", "pi05"} <= set(ADAPTERS)


def test_registered_tiny_and_protocol(policy: LeRobotFlowAdapter) -> None:
    name = policy.config.type
    assert POLICIES.get(name) is type(policy) and name in type(policy).config_class.TYPES
    assert isinstance(policy, Policy) and (policy.chunk_size, policy.action_dim) == (H, A)
    assert sum(p.numel() for p in policy.parameters()) < 5_000_000


def test_trains_two_steps_with_a_per_sample_loss(policy: LeRobotFlowAdapter) -> None:
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
    assert "model.action_out_proj.weight" in changed and any("_expert." in n for n in changed)
    assert policy.model.indicator.weight.abs().sum() > 0  # the zero-initialised indicator learns


def test_loss_is_lerobots_forward_per_sample(policy: LeRobotFlowAdapter) -> None:
    """Our loss is LeRobot's ``forward`` (``reduction="none"``) at LeRobot's time 1 - tau, reduced over the
    valid steps; pinned by noise and time."""
    b, n, tau = batch(), noise(), torch.tensor([0.3, 0.8])
    loss = policy.loss(b, noise=n, time=tau)
    x = policy._inputs(b)
    actions = policy.normalizer.normalize(ACTION, b[ACTION])
    with torch.no_grad():
        theirs = policy.model(
            x.images, x.img_masks, x.tokens, x.token_mask, *state_arg(policy, x), actions, n, 1 - tau
        )
    assert torch.allclose(loss, theirs.mean(dim=(1, 2)), atol=1e-6)
    assert torch.equal(loss, policy.loss(b, noise=n, time=tau))
    assert not torch.allclose(loss, policy.loss(b, noise=n, time=torch.tensor([0.6, 0.1])))
    padded = dict(b, action_is_pad=torch.arange(H).expand(2, H) >= 3)  # only steps 0..2 count
    assert torch.allclose(policy.loss(padded, noise=n, time=tau), theirs[:, :3].mean(dim=(1, 2)), atol=1e-6)
    all_pad = dict(b, action_is_pad=torch.ones(2, H, dtype=torch.bool))
    assert torch.equal(policy.loss(all_pad, noise=n, time=tau), torch.zeros(2))


def test_euler_loop_is_lerobots_sample_actions(policy: LeRobotFlowAdapter) -> None:
    obs, n = observation(batch()), noise()
    x = policy._inputs(obs)
    with torch.no_grad():
        theirs = policy.model.sample_actions(
            x.images, x.img_masks, x.tokens, x.token_mask, *state_arg(policy, x), noise=n
        )
    chunk = policy.sample_chunk(obs, noise=n)
    assert chunk.shape == (2, H, A) and torch.isfinite(chunk).all()
    assert torch.allclose(chunk, policy.normalizer.unnormalize(ACTION, theirs), atol=1e-5)


def test_sampling_is_pinned_by_noise_and_generator(policy: LeRobotFlowAdapter) -> None:
    obs = observation(batch())
    chunk = policy.sample_chunk(obs, noise=noise())
    assert torch.equal(chunk, policy.sample_chunk(obs, noise=noise()))
    g1, g2 = (torch.Generator().manual_seed(5) for _ in range(2))
    assert torch.equal(policy.sample_chunk(obs, generator=g1), policy.sample_chunk(obs, generator=g2))
    assert not torch.allclose(chunk, policy.sample_chunk(obs, noise=noise(seed=2)))
    assert not torch.allclose(chunk, policy.sample_chunk(obs, noise=noise(), num_steps=2))


def test_several_samples_per_observation(policy: LeRobotFlowAdapter) -> None:
    """num_samples = m: the chunks of the observations repeated m times, in a row."""
    obs, n = observation(batch()), noise(b=6)
    many = policy.sample_chunk(obs, noise=n, num_samples=3)
    assert many.shape == (6, H, A)
    torch.testing.assert_close(many, policy.sample_chunk(repeat_batch(obs, 3), noise=n))


def test_indicator_and_cfg(policy: LeRobotFlowAdapter) -> None:
    obs, n, pos = observation(batch()), noise(), torch.ones(2, dtype=torch.long)
    plain = policy.sample_chunk(obs, noise=n)
    assert torch.equal(plain, policy.sample_chunk(obs, noise=n, cond=pos))  # zero-initialised
    assert torch.equal(plain, policy.sample_chunk(obs, noise=n, cond=pos, guidance=3.0))
    randomise_indicator(policy)
    cond = policy.sample_chunk(obs, noise=n, cond=pos)
    assert not torch.allclose(plain, cond, atol=1e-3)
    assert torch.allclose(policy.sample_chunk(obs, noise=n, cond=pos, guidance=1.0), cond, atol=1e-5)
    assert not torch.allclose(policy.sample_chunk(obs, noise=n, cond=pos, guidance=3.0), cond, atol=1e-3)
    u1, c1 = (policy.sample_chunk(obs, noise=n, cond=c, num_steps=1) for c in (None, pos))
    g1 = policy.sample_chunk(obs, noise=n, cond=pos, guidance=3.0, num_steps=1)
    assert torch.allclose(g1, u1 + 3.0 * (c1 - u1), atol=1e-4)  # one Euler step is affine in v


def test_indicator_dropout_only_in_training(policy: LeRobotFlowAdapter) -> None:
    randomise_indicator(policy)
    b, n, tau, pos = batch(), noise(), torch.tensor([0.3, 0.8]), torch.ones(2, dtype=torch.long)
    unconditioned = policy.loss(b, noise=n, time=tau)
    conditioned = policy.loss(b, noise=n, time=tau, cond=pos)
    assert not torch.allclose(unconditioned, conditioned)
    policy.config.cond_dropout = 1.0
    assert torch.allclose(policy.loss(b, noise=n, time=tau, cond=pos), conditioned)  # eval: kept
    policy.train()
    assert torch.allclose(policy.loss(b, noise=n, time=tau, cond=pos), unconditioned)
    policy.config.cond_dropout = 0.0
    assert torch.allclose(policy.loss(b, noise=n, time=tau, cond=pos), conditioned)


def test_rtc_keeps_the_frozen_prefix(policy: LeRobotFlowAdapter) -> None:
    """Real-time chunking through the one integrator: the committed actions are (nearly) reproduced, the
    chunk's tail stays the policy's own."""
    obs, n = observation(batch()), noise()
    free = policy.sample_chunk(obs, noise=n)
    prev = free[:, :6] + 0.8  # a committed prefix the policy would not produce on its own
    guided = policy.sample_chunk(obs, noise=n, prefix=prev, prefix_delay=3)
    assert guided.shape == free.shape and torch.isfinite(guided).all()
    assert (guided[:, :3] - prev[:, :3]).abs().mean() < 0.2 * (free[:, :3] - prev[:, :3]).abs().mean()
    assert (guided[:, 6:] - free[:, 6:]).abs().mean() < (guided[:, :3] - free[:, :3]).abs().mean()


def test_inputs_are_checked(policy: LeRobotFlowAdapter) -> None:
    obs = observation(batch())
    with pytest.raises(KeyError, match=rf"{IMAGE_PREFIX}wrist"):
        policy.sample_chunk({k: v for k, v in obs.items() if k != f"{IMAGE_PREFIX}wrist"})
    with pytest.raises(ValueError, match=STATE):
        policy.sample_chunk(dict(obs, **{STATE: torch.zeros(2, S + 1)}))
    with pytest.raises(ValueError, match="noise"):
        policy.sample_chunk(obs, noise=torch.zeros(2, H, A + 1))
    with pytest.raises(ValueError, match="0/1"):
        policy.sample_chunk(obs, cond=torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="prefix of shape"):
        policy.sample_chunk(obs, prefix=torch.zeros(2, 4, A + 1))
    with pytest.raises(ValueError, match=ACTION):
        policy.loss(dict(batch(), **{ACTION: torch.zeros(2, H + 1, A)}))


def test_learns_two_fixed_samples(policy: LeRobotFlowAdapter) -> None:
    """Within 150 AdamW steps on two samples (checked every 10), the loss at pinned noise and flow times falls
    below half of its start, and so does the error of sampled chunks."""
    policy.train()
    b = batch(seed=7)
    obs, pinned = observation(b), repeat_batch(b, 4)
    n, tau = noise(b=8, seed=9), torch.linspace(0.1, 0.9, 8)

    def pinned_loss() -> float:
        with torch.no_grad():
            return policy.loss(pinned, noise=n, time=tau).mean().item()

    def sample_error() -> float:
        chunk = policy.sample_chunk(obs, generator=torch.Generator().manual_seed(1), num_steps=10)
        return (chunk - b[ACTION]).abs().mean().item()

    loss_before, error_before = pinned_loss(), sample_error()
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=5e-3)
    g = torch.Generator().manual_seed(0)
    for step in range(1, 151):
        loss = policy.loss(b, generator=g).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0 and pinned_loss() < 0.5 * loss_before and sample_error() < 0.5 * error_before:
            return
    pytest.fail(
        f"pinned loss {loss_before:.3f} -> {pinned_loss():.3f}, sample error {error_before:.3f} -> "
        f"{sample_error():.3f} after 150 steps"
    )


def test_save_load_round_trip(policy: LeRobotFlowAdapter, tmp_path: Path) -> None:
    randomise_indicator(policy)
    obs, n, pos = observation(batch()), noise(), torch.ones(2, dtype=torch.long)
    expected = policy.sample_chunk(obs, noise=n, cond=pos, guidance=2.0)
    ckpt = policy.save(tmp_path / "ckpt")
    assets = ckpt / policy.asset_dir
    assert (assets / "tokenizer.json").is_file() and not list(assets.glob("*.safetensors"))
    loaded = load_policy(ckpt)
    assert type(loaded) is type(policy)
    assert loaded.config == dataclasses.replace(policy.config, **{policy.asset_field: str(assets)})
    assert torch.equal(loaded.sample_chunk(obs, noise=n, cond=pos, guidance=2.0), expected)
    loaded.save(ckpt)  # re-saving over the folder it was loaded from keeps its asset files
    assert torch.equal(load_policy(ckpt).sample_chunk(obs, noise=n, cond=pos, guidance=2.0), expected)


@pytest.mark.parametrize("layout", ["model-prefixed", "unprefixed"])
def test_from_lerobot_pretrained(policy: LeRobotFlowAdapter, layout: str, tmp_path: Path) -> None:
    """A LeRobot-format folder of the tiny network loads weight for weight, its config translated back to
    ours; every other adapter refuses it; without a normaliser file, stats must be given."""
    folder = tmp_path / "lerobot"
    save_lerobot_folder(policy, folder, prefixed=layout == "model-prefixed")
    cls, name = type(policy), policy.config.type
    ours = cls.from_lerobot_pretrained(folder, **TINY[name].lerobot_overrides(policy.config)).eval()
    assert ours.config == dataclasses.replace(policy.config, pretrained_path=str(folder))
    obs = observation(batch())
    assert torch.allclose(ours.sample_chunk(obs, noise=noise()), policy.sample_chunk(obs, noise=noise()))
    for other in (n for n in ADAPTERS if POLICIES.get(n) is not cls):
        with pytest.raises(ValueError, match="type"):
            POLICIES.get(other).from_lerobot_pretrained(folder)
    next(folder.glob("policy_preprocessor*")).unlink()
    with pytest.raises(FileNotFoundError, match="stats="):
        cls.from_lerobot_pretrained(folder, **TINY[name].lerobot_overrides(policy.config))


def test_features_pool_the_vlms_prefix_per_sample(policy: LeRobotFlowAdapter) -> None:
    """``features(obs)`` (the critic's input with ``critic.encoder=policy``): one finite vector per sample,
    the VLM's width, depending on the sample (another image or instruction, another vector)."""
    b = observation(batch(3))
    f = policy.features(b)
    assert f.shape[0] == 3 and f.ndim == 2 and torch.isfinite(f).all()
    assert (f[0] - f[1]).abs().max() > 1e-4
    other = dict(b)
    other[IMAGE_PREFIX + CAMS[0]] = torch.rand_like(b[IMAGE_PREFIX + CAMS[0]])
    assert not torch.allclose(policy.features(other), f)
