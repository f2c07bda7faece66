"""Hand-computed cases for the credit arithmetic of RECAP, ALOE and HABC (training/critics/targets.py)."""

import numpy as np
import pytest
import torch
from torch import nn

from training.critics.targets import (
    RewardConfig,
    advantage_weights,
    aggregate_heads,
    chunk_td_target,
    episode_rewards,
    habc_gate,
    habc_segments,
    habc_weights,
    n_step_advantage,
    polyak_update,
    positive_threshold,
    recap_indicator,
    recap_returns,
    recap_segments,
    two_hot,
)

CFG = RewardConfig(c_fail=10.0, t_max=10)


def test_episode_rewards_and_clipped_returns():
    np.testing.assert_allclose(episode_rewards(3, True, CFG), [-0.1, -0.1, 0.0])
    np.testing.assert_allclose(episode_rewards(3, False, CFG), [-0.1, -0.1, -1.0])
    ret, _ = recap_returns(3, True, np.zeros(3), CFG)
    np.testing.assert_allclose(ret, [-0.2, -0.1, 0.0])
    ret, _ = recap_returns(3, False, np.zeros(3), CFG)
    np.testing.assert_allclose(ret, [-1.0, -1.0, -1.0])  # -1.2, -1.1, -1.0 clipped to [-1, 0]


def test_recap_intervention_split():
    human = np.array([0, 0, 1, 1, 1], dtype=bool)
    assert recap_segments(5, True, human) == [(0, 2, False), (2, 5, True)]
    assert recap_segments(5, False, human) == [(0, 5, False)]  # failure: no split
    assert recap_segments(5, True, np.zeros(5)) == [(0, 5, True)]
    ret, r = recap_returns(5, True, human, CFG)
    # autonomous prefix scored as a failed episode of length 2, the human suffix as a success of length 3
    np.testing.assert_allclose(r, [-0.1, -1.0, -0.1, -0.1, 0.0])
    np.testing.assert_allclose(ret, [-1.0, -1.0, -0.2, -0.1, 0.0])


def test_n_step_advantage_hand_computed():
    r = np.array([-0.1, -0.1, -0.1, 0.0])
    v = np.array([-0.3, -0.25, -0.1, 0.0])
    # N = 2: A_0 = r0 + r1 + V2 - V0 = -0.2 - 0.1 + 0.3 = 0.0; A_1 = -0.2 + V3 - V1 = -0.2 + 0 + 0.25 = 0.05
    # A_2 = r2 + r3 (end: V = 0) - V2 = -0.1 + 0.1 = 0.0; A_3 = r3 - V3 = 0
    np.testing.assert_allclose(n_step_advantage(r, v, 2), [0.0, 0.05, 0.0, 0.0], atol=1e-12)
    # N = 1 with gamma = 0.5: A_0 = r0 + 0.5 V1 - V0 = -0.1 - 0.125 + 0.3
    assert n_step_advantage(r, v, 1, gamma=0.5)[0] == pytest.approx(0.075)


def test_recap_threshold_and_indicator():
    adv = np.arange(10, dtype=float)  # 0..9
    eps = positive_threshold(adv, 0.3)
    assert eps == pytest.approx(6.3)  # np.quantile(0..9, 0.7)
    human = np.zeros(10, dtype=bool)
    human[0] = True
    ind = recap_indicator(adv, human, eps)
    np.testing.assert_array_equal(ind, [1, 0, 0, 0, 0, 0, 0, 1, 1, 1])  # top 3 + the forced human frame
    with pytest.raises(ValueError):
        positive_threshold(adv, 1.0)


def test_two_hot_is_a_distribution_with_the_right_mean():
    centres = torch.linspace(-1, 0, 5)  # -1, -0.75, -0.5, -0.25, 0
    y = two_hot(torch.tensor([-0.6, 0.0, -1.0, -2.0]), 5)
    torch.testing.assert_close(y.sum(-1), torch.ones(4))
    torch.testing.assert_close(y @ centres, torch.tensor([-0.6, 0.0, -1.0, -1.0]))
    torch.testing.assert_close(y[0], torch.tensor([0.0, 0.4, 0.6, 0.0, 0.0]))


def test_chunk_td_target_with_terminal_inside_the_chunk():
    gamma = 0.5
    rewards = torch.tensor([[1.0, 2.0, 4.0], [1.0, 2.0, 4.0]])
    # row 0: no terminal -> 1 + 0.5*2 + 0.25*4 + 0.125*8 = 4.0
    # row 1: terminal at i = 1 -> 1 + 0.5*2 = 2.0 (r after the terminal and the bootstrap ignored)
    dones = torch.tensor([[False, False, False], [False, True, True]])
    y = chunk_td_target(rewards, dones, torch.tensor([8.0, 8.0]), gamma)
    torch.testing.assert_close(y, torch.tensor([4.0, 2.0]))
    # terminal at the very first step: only r_t
    y = chunk_td_target(rewards[:1], torch.tensor([[True, True, True]]), torch.tensor([100.0]), gamma)
    torch.testing.assert_close(y, torch.tensor([1.0]))


def test_ensemble_aggregation():
    q = torch.tensor([[1.0, 5.0], [3.0, 2.0], [2.0, 8.0]])  # [K=3, B=2]
    g = torch.Generator().manual_seed(0)
    agg = aggregate_heads(q, "min2", g)
    assert all(agg[b] in q[:, b] and agg[b] <= q[:, b].max() for b in range(2))
    assert agg[0] < 3.0 or agg[1] < 8.0  # the min of two distinct heads is never both maxima
    torch.testing.assert_close(aggregate_heads(q, "mean_std"), q.mean(0) - q.std(0))


def test_polyak_update():
    src, tgt = nn.Linear(2, 1), nn.Linear(2, 1)
    with torch.no_grad():
        src.weight.fill_(1.0)
        src.bias.fill_(1.0)
        tgt.weight.fill_(0.0)
        tgt.bias.fill_(2.0)
    polyak_update(tgt, src, 0.1)
    torch.testing.assert_close(tgt.weight, torch.full((1, 2), 0.1))
    torch.testing.assert_close(tgt.bias, torch.tensor([1.9]))


def test_advantage_weights_clip():
    w = advantage_weights(torch.tensor([0.0, 1.0, 10.0]), beta=1.0, w_max=20.0)
    torch.testing.assert_close(w, torch.tensor([1.0, float(np.e), 20.0]))


def test_habc_segments_intervention_aware_credit():
    human = np.array([0, 0, 1, 1, 0, 0], dtype=bool)
    # the autonomous segment that ends at the takeover is a failure, even though the episode succeeded
    assert habc_segments(human, True) == [(0, 2, False, False), (2, 4, True, True), (4, 6, False, True)]
    assert habc_segments(np.zeros(3), False) == [(0, 3, False, False)]


def test_habc_gate_and_weight_normalisation():
    g = habc_gate(torch.tensor([0.8, 1.0, 0.0]), tau=0.8, kappa=20.0)
    torch.testing.assert_close(
        g, torch.tensor([0.5, torch.sigmoid(torch.tensor(4.0)), torch.sigmoid(torch.tensor(-16.0))])
    )
    a_v = torch.tensor([1.0, -1.0, 0.0, 5.0])
    a_e = torch.tensor([-1.0, 1.0, 0.0, 5.0])
    gate = torch.tensor([0.0, 0.0, 0.0, 0.0])  # viability only
    human = torch.tensor([False, False, False, True])
    w = habc_weights(a_v, a_e, gate, human, beta=1.0, w_max=20.0)
    # z over autonomous frames: a_v = (1, -1, 0) has mean 0, std sqrt(2/3) -> z = (1.2247, -1.2247, 0)
    z = torch.tensor([1.0, -1.0, 0.0]) / np.sqrt(2 / 3)
    raw = torch.exp(z)
    torch.testing.assert_close(w[:3], raw / raw.mean(), rtol=1e-4, atol=1e-5)
    assert w[3] == 1.0 and w[:3].mean() == pytest.approx(1.0)
    # gate = 1: efficiency only, which ranks the frames the other way
    w_e = habc_weights(a_v, a_e, torch.ones(4), human, beta=1.0, w_max=20.0)
    assert w_e[1] > w_e[2] > w_e[0]
