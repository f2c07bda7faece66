"""Our flow-matching VLA: per-sample loss, pinned noise, save/load, CFG, KV cache, learning."""

import pytest
import torch

import policies  # noqa: F401
from policies.flow_matching import FlowMatchingPolicy, debug_config
from vla.batch import ACTION, ACTION_IS_PAD, IMAGE_PREFIX, STATE, TASK, repeat_batch
from vla.policy import Policy, load_policy

torch.set_num_threads(1)


def make_batch(cfg, b=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    h, w = cfg.image_size
    batch = {IMAGE_PREFIX + c: torch.rand(b, 3, h, w, generator=g) for c in cfg.cameras}
    batch[STATE] = torch.randn(b, cfg.state_dim, generator=g)
    batch[TASK] = [["put the red cube in the blue bin", "reach the red ball"][i % 2] for i in range(b)]
    batch[ACTION] = torch.randn(b, cfg.chunk_size, cfg.action_dim, generator=g)
    batch[ACTION_IS_PAD] = torch.zeros(b, cfg.chunk_size, dtype=torch.bool)
    return batch


def obs_of(batch):
    return {k: v for k, v in batch.items() if k not in (ACTION, ACTION_IS_PAD)}


def test_is_a_policy_and_loss_is_per_sample():
    cfg = debug_config()
    p = FlowMatchingPolicy(cfg)
    assert isinstance(p, Policy)
    batch = make_batch(cfg)
    loss = p.loss(batch)
    assert loss.shape == (4,) and torch.isfinite(loss).all()
    noise = torch.randn(4, cfg.chunk_size, cfg.action_dim)
    t = torch.rand(4)
    assert torch.equal(p.loss(batch, noise=noise, time=t), p.loss(batch, noise=noise, time=t))


def test_padded_steps_do_not_count():
    cfg = debug_config()
    p = FlowMatchingPolicy(cfg)
    batch = make_batch(cfg)
    noise, t = torch.randn(4, cfg.chunk_size, cfg.action_dim), torch.rand(4)
    base = p.loss(batch, noise=noise, time=t)
    batch[ACTION_IS_PAD][:, -2:] = True
    changed = dict(batch)
    changed[ACTION] = batch[ACTION].clone()
    changed[ACTION][:, -2:] += 100.0  # garbage beyond the episode end
    masked = p.loss(changed, noise=noise, time=t)
    assert torch.isfinite(masked).all() and masked.max() < base.max() * 10


def test_save_load_gives_identical_chunks(tmp_path):
    cfg = debug_config()
    p = FlowMatchingPolicy(cfg).eval()
    obs = obs_of(make_batch(cfg, b=2))
    noise = torch.randn(2, cfg.chunk_size, cfg.action_dim)
    p.save(tmp_path / "ck")
    q = load_policy(tmp_path / "ck")
    assert torch.equal(p.sample_chunk(obs, noise=noise), q.sample_chunk(obs, noise=noise))
    assert p.sample_chunk(obs, noise=noise).shape == (2, cfg.chunk_size, cfg.action_dim)


def test_cfg_beta_one_equals_conditional_and_zero_init_indicator():
    cfg = debug_config()
    p = FlowMatchingPolicy(cfg).eval()
    obs = obs_of(make_batch(cfg, b=2))
    noise = torch.randn(2, cfg.chunk_size, cfg.action_dim)
    cond = torch.tensor([1, 1])
    plain = p.sample_chunk(obs, noise=noise)
    assert torch.allclose(p.sample_chunk(obs, noise=noise, cond=cond), plain)  # zero-initialised embedding
    with torch.no_grad():
        p.model.cond_emb.weight.normal_()  # as after RECAP training
    conditional = p.sample_chunk(obs, noise=noise, cond=cond)
    assert not torch.allclose(conditional, plain)
    torch.testing.assert_close(p.sample_chunk(obs, noise=noise, cond=cond, guidance=1.0), conditional)
    guided = p.sample_chunk(obs, noise=noise, cond=cond, guidance=3.0)
    assert not torch.allclose(guided, conditional)
    # guidance in a limited interval: an empty one is plain conditional sampling, a partial one differs
    # from both, and the full one is the default
    p.config.guidance_interval = (0.5, 0.5)
    torch.testing.assert_close(p.sample_chunk(obs, noise=noise, cond=cond, guidance=3.0), conditional)
    p.config.guidance_interval = (0.2, 0.7)
    partial = p.sample_chunk(obs, noise=noise, cond=cond, guidance=3.0)
    assert not torch.allclose(partial, guided) and not torch.allclose(partial, conditional)
    p.config.guidance_interval = (0.0, 1.0)
    torch.testing.assert_close(p.sample_chunk(obs, noise=noise, cond=cond, guidance=3.0), guided)


def test_cached_and_uncached_samplers_agree():
    cfg = debug_config()
    p = FlowMatchingPolicy(cfg).eval()
    obs = obs_of(make_batch(cfg, b=3))
    noise = torch.randn(3, cfg.chunk_size, cfg.action_dim)
    torch.testing.assert_close(
        p.sample_chunk(obs, noise=noise), p.sample_chunk(obs, noise=noise, use_cache=False)
    )


def test_several_samples_per_observation_match_repeated_observations():
    """num_samples = m encodes each observation once: the same chunks as the observations repeated m times,
    with the indicator (CFG) and an RTC prefix given per observation."""
    cfg = debug_config()
    p = FlowMatchingPolicy(cfg).eval()
    obs = obs_of(make_batch(cfg, b=3))
    m = 4
    noise = torch.randn(3 * m, cfg.chunk_size, cfg.action_dim)
    cond = torch.tensor([1, 0, 1])
    prefix = torch.randn(3, 5, cfg.action_dim)
    kw = {"noise": noise, "guidance": 2.0, "prefix_delay": 2}
    rep = repeat_batch(obs, m)
    many = p.sample_chunk(obs, cond=cond, prefix=prefix, num_samples=m, **kw)
    assert many.shape == (3 * m, cfg.chunk_size, cfg.action_dim)
    torch.testing.assert_close(
        many,
        p.sample_chunk(rep, cond=cond.repeat_interleave(m), prefix=prefix.repeat_interleave(m, 0), **kw),
        atol=1e-5,
        rtol=1e-4,
    )
    # different noise per sample: different chunks for the same observation
    assert not torch.allclose(many[0], many[1])


def test_missing_stats_key_and_observation_key_raise_clearly():
    cfg = debug_config()
    p = FlowMatchingPolicy(cfg)
    obs = obs_of(make_batch(cfg, b=2))
    del obs[IMAGE_PREFIX + "wrist"]
    try:
        p.sample_chunk(obs)
    except KeyError as e:
        assert "observation.images.wrist" in str(e)
    else:
        raise AssertionError("missing camera not reported")


def test_images_of_another_size_name_the_camera_and_the_setting():
    cfg = debug_config()  # 32x32
    p = FlowMatchingPolicy(cfg)
    batch = make_batch(cfg, b=2)
    batch[IMAGE_PREFIX + "wrist"] = torch.rand(2, 3, 48, 64)
    with pytest.raises(ValueError, match=r"camera 'wrist': images are 48x64 .*policy.image_size=\[32, 32\]"):
        p.loss(batch)


def test_loss_falls_on_a_tiny_dataset():
    torch.manual_seed(0)
    cfg = debug_config()
    p = FlowMatchingPolicy(cfg)
    batch = make_batch(cfg, b=8, seed=1)
    # structured targets: each sample's chunk is a smooth function of its state
    t = torch.linspace(0, 1, cfg.chunk_size)[None, :, None]
    batch[ACTION] = batch[STATE][:, None, :] * (1 - t) + 0.5 * t
    opt = torch.optim.AdamW(p.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(150):
        loss = p.loss(batch, generator=g).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    start, end = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert end < 0.35 * start, (start, end)
