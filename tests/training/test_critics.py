"""Each critic learns on a toy dataset: its loss falls and its value orders success above failure; the
labels it hands to the algorithms have the documented form."""

import sys
from pathlib import Path

import pytest
import torch

from policies.flow_matching import FlowMatchingPolicy, debug_config
from training.algorithms import ALGORITHMS
from training.critics import CRITICS
from training.data import ChunkDataset, DataConfig
from vla.errors import NonFiniteError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from toy_episodes import write_toy_episodes


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = write_toy_episodes(tmp_path_factory.mktemp("toy") / "ds")
    data = ChunkDataset(
        DataConfig(roots=[str(root)], random_shift=0), ["agentview", "wrist"], 4, progress=False
    )
    torch.manual_seed(0)
    policy = FlowMatchingPolicy(debug_config(chunk_size=4), data.stats())
    return data, policy


def _success_mask(data):
    ok = torch.tensor([m.success for m in data.episodes])
    return ok[data.episode_id]


FIELDS = {
    "distributional_value": {"bins": 51, "n_step": 3},
    "expectile_value": {"n_step": 3},
    "chunk_q": {"ensemble": 4, "samples": 2, "gamma": 0.9, "polyak": 0.05},
    "habc": {},
}


@pytest.mark.parametrize(
    ("name", "encoder"), [(n, "policy") for n in FIELDS] + [("distributional_value", "own")]
)  # the own encoder is shared code: one critic covers it
def test_critic_learns_and_orders_success_above_failure(toy, name, encoder):
    data, policy = toy
    cls = CRITICS.get(name)
    steps = 150 if encoder == "own" else 300
    cfg = cls.config_class(
        encoder=encoder,
        steps=steps,
        batch_size=64,
        hidden=64,
        reward={"c_fail": 20.0, "t_max": 12},
        **FIELDS[name],
    )
    critic = cls(cfg, data, policy, progress=False)
    history = critic.fit()
    k = 20
    assert sum(history[-k:]) / k < 0.6 * sum(history[:k]) / k, f"{name}: loss did not fall"
    labels = critic.label()
    ok = _success_mask(data)
    human = data.is_intervention
    auto = ~human
    value = labels["value"]
    assert value[ok & auto].mean() > value[~ok & auto].mean() + 0.1 * value.abs().mean()
    if "cond" in labels:  # RECAP: ~30% of autonomous frames positive, human frames forced positive
        assert set(labels["cond"].unique().tolist()) <= {0, 1}
        assert bool(labels["cond"][human].all())
        assert 0.2 <= float(labels["cond"][auto].float().mean()) <= 0.4
    if "weight" in labels:
        w = labels["weight"]
        assert bool((w >= 0).all()) and float(w.mean()) == pytest.approx(1.0, rel=0.05)


def test_chunk_q_value_of_success_exceeds_failure_and_target_tracks(toy):
    data, policy = toy
    cls = CRITICS.get("chunk_q")
    critic = cls(
        cls.config_class(steps=50, batch_size=32, ensemble=3, samples=2, polyak=0.5), data, policy, False
    )
    before = [p.clone() for p in critic.ensemble_target.parameters()]
    critic.fit()
    moved = any(
        not torch.equal(a, b) for a, b in zip(before, critic.ensemble_target.parameters(), strict=True)
    )
    assert moved  # Polyak targets follow the online heads
    q = critic.q(data.observations(torch.arange(4)), data.action[:4, None].expand(-1, 4, -1))
    assert q.shape == (3, 4)


def test_habc_labels_human_frames_with_unit_weight(toy):
    data, policy = toy
    cls = CRITICS.get("habc")
    critic = cls(cls.config_class(steps=20, batch_size=32), data, policy, progress=False)
    critic.fit()
    labels = critic.label()
    assert bool((labels["weight"][data.is_intervention] == 1.0).all())
    # autonomous segments that end at a takeover are labelled failure, however the episode ended
    first_human = int(torch.nonzero(data.is_intervention)[0])
    assert (
        float(critic.y_v[first_human - 1]) == 0.0 and data.episodes[int(data.episode_id[first_human])].success
    )


@pytest.mark.parametrize("bad", ["loss", "gradient norm"])
def test_a_critic_fed_a_nan_stops_before_any_weight_moves(toy, bad):
    data, policy = toy
    cls = CRITICS.get("expectile_value")
    critic = cls(cls.config_class(steps=5, batch_size=8, hidden=16, n_step=3), data, policy, progress=False)
    own_loss, w = critic.loss, next(critic.parameters())
    if bad == "loss":
        critic.loss = lambda idx: own_loss(idx) * float("nan")
    else:  # a finite loss, an infinite gradient: sqrt(0) = 0, its derivative inf
        critic.loss = lambda idx: own_loss(idx) + torch.sqrt(w.flatten()[0] - w.flatten()[0].detach())
    before = {k: v.clone() for k, v in critic.state_dict().items()}
    with pytest.raises(NonFiniteError, match=rf"critic expectile_value: step 1: the {bad} is (nan|inf)"):
        critic.fit()
    assert all(torch.equal(before[k], v) for k, v in critic.state_dict().items())


def test_the_critic_config_is_typed_once_and_names_an_unknown_field():
    aloe = ALGORITHMS.get("aloe").make_config({"name": "aloe", "critic": {"mode": "indicator"}})
    assert type(aloe.critic).__name__ == "QChunkConfig" and aloe.critic.mode == "indicator"
    assert aloe.critic.online  # the class's default, read nowhere else
    dpo = ALGORITHMS.get("flow_dpo").make_config({"name": "flow_dpo", "critic": {"online": True}})
    assert dpo.critic.pairs and not dpo.critic.online  # what Flow-DPO fixes, whatever the YAML says
    with pytest.raises(
        KeyError,
        match=r"algo.critic \(distributional_value\): unknown field\(s\) \['bnis'\].*known: .*'bins'",
    ):
        ALGORITHMS.get("recap").make_config({"name": "recap", "critic": {"bnis": 3}})
    with pytest.raises(KeyError, match=r"algo.critic.reward: unknown field\(s\) \['tmax'\]"):
        ALGORITHMS.get("awbc").make_config({"name": "awbc", "critic": {"reward": {"tmax": 3}}})
