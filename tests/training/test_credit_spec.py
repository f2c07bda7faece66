"""The credit methods as ../shared/METHODS.md specifies them: ALOE's critic evaluates the *current* actor
during actor training; HABC's outcome labels come only from segments the policy executed, and its weights
are standardised per batch."""

import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from policies.flow_matching import FlowMatchingPolicy, debug_config
from training.algorithms.base import OptimConfig
from training.algorithms.credit import ALOE, HABC
from training.critics import CRITICS
from training.critics.targets import habc_weights
from training.data import ChunkDataset, DataConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from toy_episodes import write_toy_episodes

REWARD = {"c_fail": 20.0, "t_max": 12}


def _data(*roots):
    return ChunkDataset(
        DataConfig(roots=[str(r) for r in roots], random_shift=0), ["agentview", "wrist"], 4, progress=False
    )


def _policy(data, seed):
    torch.manual_seed(seed)
    return FlowMatchingPolicy(debug_config(chunk_size=4), data.stats())


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spec")
    policy_root = write_toy_episodes(tmp / "policy", n=12)
    demos_ok = write_toy_episodes(tmp / "demos_ok", n=8, seed=1, source="demo")
    demos_bad = write_toy_episodes(tmp / "demos_bad", n=8, seed=1, source="demo", flip_success=True)
    return tmp, policy_root, demos_ok, demos_bad


def test_aloe_targets_and_baselines_use_the_current_actor(toy, tmp_path):
    _, root, _, _ = toy
    data = _data(root)
    critic_cfg = {
        "encoder": "policy",
        "steps": 20,
        "batch_size": 32,
        "hidden": 32,
        "ensemble": 3,
        "samples": 2,
    }
    actor = _policy(data, 0)
    alg = ALOE(actor, OptimConfig(), 10, config={"name": "aloe", "critic": {**critic_cfg, "reward": REWARD}})
    alg.prepare(data, tmp_path, progress=False)
    critic = alg.critic
    idx = torch.tensor([0, 3, 7, 20])
    m = 2
    drawn_from = torch.cat([critic.next_frames(idx), idx.repeat_interleave(m)])

    def expected(policy, state):
        """(bootstrap chunks [B, 1, H, A], baseline chunks [B, m, H, A]) the current actor draws."""
        g = torch.Generator()
        g.set_state(state)
        drawn = critic.policy_chunks(policy, drawn_from, 1, g)[:, 0]
        return drawn[: len(idx), None], drawn[len(idx) :].view(len(idx), m, *drawn.shape[1:])

    state = alg.sample_generator.get_state()
    _, baseline = alg.critic_step(idx)
    assert torch.equal(baseline, expected(actor, state)[1])

    other = _policy(data, 1)  # swap the actor: the critic's A' must follow it
    alg.policy = other
    state = alg.sample_generator.get_state()
    before = [p.detach().clone() for p in critic.parameters() if p.requires_grad]
    _, baseline = alg.critic_step(idx)
    assert torch.equal(baseline, expected(other, state)[1])
    assert not torch.allclose(baseline, expected(actor, state)[1])
    after = [p for p in critic.parameters() if p.requires_grad]
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))  # the critic trained

    # the TD target bootstraps with the chunk it is given (the current actor's at o_{t+H})
    boot_a = expected(actor, state)[0][:, 0]
    boot_b = expected(other, state)[0][:, 0]
    assert not torch.allclose(critic.td_target(idx, boot_a), critic.td_target(idx, boot_b))


def _habc_labels(policy_root, demo_root, **critic):
    data = _data(policy_root, demo_root)
    policy = _policy(data, 0)
    cls = CRITICS.get("habc")
    cfg = cls.config_class(encoder="policy", steps=60, batch_size=32, hidden=32, reward=REWARD, **critic)
    c = cls(cfg, data, policy, progress=False)
    c.fit()
    return c, c.label()


def test_habc_outcome_labels_ignore_demonstration_segments(toy):
    _, root, demos_ok, demos_bad = toy
    c, a = _habc_labels(root, demos_ok)
    _, b = _habc_labels(root, demos_bad)  # the same demos with the opposite outcomes
    is_demo = torch.tensor([c.data.episodes[e].source == "demo" for e in c.data.episode_id.tolist()])
    assert not c.labelled[is_demo].any() and c.labelled[~is_demo & c.autonomous].all()
    for key in ("a_v", "a_e", "gate", "weight"):
        assert torch.equal(a[key], b[key]), key  # demo outcomes changed nothing
    # the variant that also labels demonstrations does see them
    _, a2 = _habc_labels(root, demos_ok, label_sources=["policy", "demo"])
    _, b2 = _habc_labels(root, demos_bad, label_sources=["policy", "demo"])
    assert not torch.equal(a2["a_v"], b2["a_v"])


def test_habc_monte_carlo_viability_advantage_sees_every_segments_outcome(toy):
    """The variant: A_v = y_seg - V_v(s_t), the spec's one-step advantages summed to the segment's end, on
    demonstrations too (whose outcomes the heads still never see)."""
    _, root, demos_ok, demos_bad = toy
    c, a = _habc_labels(root, demos_ok, viability_advantage="monte_carlo")
    c_bad, b = _habc_labels(root, demos_bad, viability_advantage="monte_carlo")
    _, one = _habc_labels(root, demos_ok)
    assert torch.equal(a["value"], b["value"]) and torch.equal(a["value"], one["value"])  # same heads
    is_demo = torch.tensor([c.data.episodes[e].source == "demo" for e in c.data.episode_id.tolist()])
    flipped = (a["a_v"] - b["a_v"]).abs()
    outcome_flipped = (c.y_v - c_bad.y_v).abs()  # 0 on autonomous segments that end at a takeover
    demo = is_demo & c.autonomous
    assert outcome_flipped[demo].sum() > 0.5 * demo.sum()
    assert torch.allclose(flipped[demo], outcome_flipped[demo])  # the demo's own outcome counts
    assert torch.equal(flipped[~is_demo], torch.zeros(int((~is_demo).sum())))
    # on a segment the policy executed it is the telescoped sum of the one-step advantages
    seg = c.labelled & (c.seg_end == c.seg_end[torch.nonzero(c.labelled)[0, 0]])
    frames = torch.nonzero(seg).squeeze(1)
    summed = one["a_v"][frames].flip(0).cumsum(0).flip(0)
    assert torch.allclose(a["a_v"][frames], summed, atol=1e-5)
    with pytest.raises(ValueError, match="viability_advantage='td'"):
        _habc_labels(root, demos_ok, viability_advantage="td")


def test_habc_weights_are_standardised_per_batch(toy, tmp_path):
    _, root, demos_ok, _ = toy
    data = _data(root, demos_ok)
    critic = {"encoder": "policy", "steps": 30, "batch_size": 32, "hidden": 32, "reward": REWARD}
    alg = HABC(_policy(data, 0), OptimConfig(), 10, config={"name": "habc", "critic": critic})
    alg.prepare(data, tmp_path, progress=False)
    batch = data.get(torch.arange(0, 40, 3))
    w = alg.batch_weights(batch)
    ref = habc_weights(batch["a_v"], batch["a_e"], batch["gate"], batch["human"], 0.05, 20.0)
    assert torch.allclose(w, ref)
    auto = ~batch["human"]
    assert w[auto].mean() == pytest.approx(1.0, abs=1e-5)  # renormalised over the batch, not the dataset
    dataset_wide = load_file(str(tmp_path / "critic" / "labels.safetensors"))["weight"]
    assert not torch.allclose(w, dataset_wide[torch.arange(0, 40, 3)])  # dataset-wide weights differ
    metrics = alg.update(batch)
    assert metrics["weight_max"] == pytest.approx(float(w.max()), rel=1e-5)
