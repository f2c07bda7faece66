"""The preference methods: APO's labels and balanced batches, a frozen reference that survives a resume,
Flow-DPO's pairs and loss at the start, and a learning test of APO on a toy task with takeovers
(``takeovers.py``): it moves the policy off the habit the human corrects, where SFT does not."""

import math
import sys
from pathlib import Path

import pytest
import torch

from policies.flow_matching import FlowMatchingPolicy, debug_config
from training.algorithms import ALGORITHMS, OptimConfig
from training.algorithms.apo import balanced_weights, preference_labels
from training.algorithms.preference import FrozenReference, shared_noise, with_actions
from training.data import ChunkDataset, DataConfig
from vla.policy import load_policy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from takeovers import BAD, GOOD, write_patterns, write_takeovers
from toy_episodes import write_toy_episodes
from two_modes import fast_fraction, train_toy

CAMERAS = ["agentview", "wrist"]


@pytest.fixture(scope="module")
def takeovers(tmp_path_factory):
    return write_takeovers(tmp_path_factory.mktemp("takeovers") / "data")


def _data(*roots, chunk=4):
    return ChunkDataset(DataConfig(roots=[str(r) for r in roots], random_shift=0), CAMERAS, chunk, False)


def test_apo_labels_the_frames_before_a_takeover_undesirable(takeovers, tmp_path):
    plain = write_toy_episodes(tmp_path / "toy", n=8)  # policy episodes, takeovers in episodes 0 and 4
    data = _data(takeovers, plain)
    labels = preference_labels(data, k=3)
    for e, meta in enumerate(data.episodes):
        got = labels[data.episode_frames(e)].tolist()
        human = data.is_intervention[data.episode_frames(e)]
        if meta.source == "demo":
            assert got == [1] * len(got)
        elif not human.any():  # a policy episode without a takeover: not used
            assert got == [0] * len(got)
        else:
            first = int(human.int().argmax())
            assert got == [0] * (first - 3) + [-1] * 3 + [1] * (len(got) - first), (e, got)
    w = balanced_weights(labels)
    assert float(w[labels == 1].sum()) == pytest.approx(0.5)
    assert float(w[labels == -1].sum()) == pytest.approx(0.5)
    assert float(w[labels == 0].sum()) == 0.0
    idx = torch.multinomial(w, 4000, replacement=True, generator=torch.Generator().manual_seed(0))
    assert abs(float((labels[idx] == 1).float().mean()) - 0.5) < 0.03


def test_apo_labels_the_lead_in_of_every_takeover(tmp_path):
    """Two takeovers in an episode: the policy frames before each are undesirable, not only the first's;
    human frames inside a lead-in (takeovers fewer than k frames apart) stay desirable."""
    episodes = [("pppppphhppppphhh", True, "policy"), ("pphhphhp", False, "policy"), ("pppp", True, "demo")]
    data = _data(write_patterns(tmp_path / "data", episodes))
    got = [preference_labels(data, k=3)[data.episode_frames(e)].tolist() for e in range(3)]
    assert got[0] == [0, 0, 0, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, 1, 1, 1]
    assert got[1] == [-1, -1, 1, 1, -1, 1, 1, 1]
    assert got[2] == [1, 1, 1, 1]


def test_apo_refuses_data_without_takeovers_by_name(tmp_path):
    data = _data(write_toy_episodes(tmp_path / "demos", n=4, source="demo"))  # demonstrations only
    policy = FlowMatchingPolicy(debug_config(chunk_size=4), data.stats())
    apo = ALGORITHMS.get("apo")(policy, OptimConfig(), 10)
    with pytest.raises(ValueError, match=r"0 undesirable frames.*human takeover"):
        apo.prepare(data, tmp_path / "out")


def test_the_reference_is_the_starting_policy_after_a_resume(takeovers, tmp_path):
    data = _data(takeovers)
    torch.manual_seed(0)
    start = FlowMatchingPolicy(debug_config(chunk_size=4), data.stats())
    ref = FrozenReference(start, tmp_path)
    batch = data.sample(8, torch.Generator().manual_seed(0))
    noise, time = shared_noise(start, 8, torch.Generator().manual_seed(1))
    r, _ = ref.log_ratio(start, batch, noise, time)
    assert torch.allclose(r, torch.zeros(8), atol=1e-4)  # the policy against itself
    torch.manual_seed(1)  # a resumed run builds a fresh policy before loading its state
    other = FlowMatchingPolicy(debug_config(chunk_size=4), data.stats())
    again = FrozenReference(other, tmp_path)
    for a, b in zip(again.model.state_dict().values(), start.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert not any(p.requires_grad for p in again.model.parameters())


def test_flow_dpo_pairs_and_its_loss_at_the_start(takeovers, tmp_path):
    data = _data(takeovers)
    policy = FlowMatchingPolicy(debug_config(chunk_size=4), data.stats())
    critic = {"encoder": "policy", "steps": 20, "batch_size": 32, "hidden": 32, "ensemble": 3, "samples": 5}
    config = {"name": "flow_dpo", "critic": critic}
    algo = ALGORITHMS.get("flow_dpo")(policy, OptimConfig(), 10, config=config)
    algo.prepare(data, tmp_path, progress=False)
    c = algo.critic
    chosen, rejected = data.labels["chosen"], data.labels["rejected"]  # [N, H, A] raw
    assert chosen.shape == (len(data), 4, 8) and not torch.equal(chosen, rejected)
    idx = torch.arange(0, len(data), 7)
    q = lambda chunks: c.q_values(c.features(idx), (chunks - c.a_mean) / c.a_std).mean(0)  # noqa: E731
    with torch.no_grad():
        q_all = torch.stack([q(c.samples[idx, j] * c.a_std + c.a_mean) for j in range(5)])  # [M, B]
        assert torch.allclose(q(chosen[idx]), q_all.max(0).values, atol=1e-5)
        assert torch.allclose(q(rejected[idx]), q_all.min(0).values, atol=1e-5)
        # NORA-1.5's anchor to the data's action: weighted heavily, it ranks the chunks by distance alone
        c.cfg.pair_anchor = 1e6
        anchored = c.pairs()
        distance = (c.samples - c.chunks(torch.arange(len(data)), 4)[:, None]).abs().mean((-2, -1))  # [N, M]
        near, far = distance.argmin(1), distance.argmax(1)
        rows = torch.arange(len(data))
        assert torch.allclose(anchored["chosen"], c.samples[rows, near] * c.a_std + c.a_mean)
        assert torch.allclose(anchored["rejected"], c.samples[rows, far] * c.a_std + c.a_mean)
    batch = data.get(idx)
    batch.update(chosen=chosen[idx], rejected=rejected[idx])
    noise, time = shared_noise(policy, len(idx), torch.Generator().manual_seed(0))
    fm = policy.loss(with_actions(batch, chosen[idx]), noise=noise, time=time).detach()
    algo.generator.manual_seed(0)  # the update draws the same noise and time
    metrics = algo.update(batch)
    # policy = reference: D_w = D_l = 0, so L = log 2 + lambda L_FM(chosen)
    assert metrics["loss"] == pytest.approx(math.log(2) + float(fm.mean()), rel=1e-4)


def _train(root, out, algo, init_from=None, steps=120):
    return train_toy(root, out, algo, steps=steps, init_from=init_from)


def test_apo_moves_the_policy_off_the_habit_before_takeovers(takeovers, tmp_path):
    """Near the start the data holds more of the policy's bad frames (v = -0.05, before each takeover) than
    demo frames (v = +0.2); every episode succeeds, so filtered BC is SFT here. Share of good first actions
    at p in {0, 0.05}, measured: base 0.68, SFT continued 0.70, APO 1.0, APO without its BC term (KTO alone)
    1.0."""
    base = _train(takeovers, tmp_path / "base", {"name": "sft"}, steps=200)
    good = lambda ckpt: fast_fraction(  # noqa: E731
        load_policy(ckpt), positions=(0.0, 0.05), threshold=(GOOD + BAD) / 2
    )
    sft = good(_train(takeovers, tmp_path / "sft", {"name": "sft"}, init_from=base))
    for name, extra in (("apo", {}), ("kto_only", {"bc_weight": 0.0})):
        algo = {"name": "apo", "error_steps": 2, **extra}
        share = good(_train(takeovers, tmp_path / name, algo, init_from=base))
        assert share >= max(sft + 0.2, 0.9), (name, share, sft)
