"""Execution-horizon upcycling on synthetic chunks with a known velocity break."""

import numpy as np
import pytest

from vla.runtime import ChunkExecutor
from vla.runtime.upcycling import (
    CALIBRATION_QUANTILES,
    UpcyclingConfig,
    calibrate_tau,
    calibration_from_actions,
    replan_discrepancy,
    tau_from_calibration,
    upcycled_horizon,
    velocity_change,
)

DT = 0.1


def chunk_with_break(h_len=20, brk=12, dims=3):
    """Constant velocity 0.1/step up to action `brk`, then the direction flips: ||dv|| jumps at k = brk."""
    t = np.arange(h_len, dtype=float)
    a = np.where(t <= brk, 0.1 * t, 0.1 * brk - 0.3 * (t - brk))
    return np.stack([a] * dims, axis=1)


def test_velocity_change_is_zero_on_a_ramp_and_spikes_at_the_break():
    dv = velocity_change(chunk_with_break(brk=12), DT)
    assert np.allclose(dv[:11], 0.0)  # k = 1..11 smooth
    assert dv[11] > 1.0  # k = 12: v_12 = -3/s vs v_11 = 1/s per dim


def test_horizon_extends_to_the_break():
    cfg = UpcyclingConfig(enabled=True, tau=0.5)
    assert upcycled_horizon(chunk_with_break(brk=12), 5, DT, cfg) == 12
    assert upcycled_horizon(chunk_with_break(brk=12), 14, DT, cfg) == 20  # no break after h0: up to H
    cfg_d = UpcyclingConfig(enabled=True, tau=0.5, delay_margin=4)
    assert upcycled_horizon(chunk_with_break(brk=18), 5, DT, cfg_d) == 16  # h* <= H - d
    assert upcycled_horizon(chunk_with_break(brk=12), 5, DT, UpcyclingConfig(enabled=False, tau=0.5)) == 5
    capped = UpcyclingConfig(enabled=True, tau=0.5, max_horizon=8)
    assert upcycled_horizon(chunk_with_break(brk=12), 5, DT, capped) == 8  # h* <= max_horizon
    assert upcycled_horizon(chunk_with_break(brk=12), 10, DT, capped) == 10  # never below h0


def test_calibration_stores_a_tau_per_quantile():
    rng = np.random.default_rng(0)
    actions = np.cumsum(rng.normal(size=(200, 3)), axis=0)  # 10 episodes of 20 steps
    ends = np.repeat(np.arange(20, 201, 20), 20)
    calib = calibration_from_actions(actions, ends, chunk_size=10, dt=DT)
    taus = [tau_from_calibration(calib, q) for q in CALIBRATION_QUANTILES]
    assert taus == sorted(taus) and taus[0] < taus[-1]
    assert tau_from_calibration(calib) == calib["tau"] == tau_from_calibration(calib, 0.95)
    with pytest.raises(KeyError, match=r"quantile 0\.6"):
        tau_from_calibration(calib, 0.6)


def test_threshold_from_demo_quantile_and_from_the_prefix():
    demos = [
        chunk_with_break(brk=b) + 0.001 * np.random.default_rng(b).normal(size=(20, 3)) for b in range(8, 18)
    ]
    tau = calibrate_tau(demos, DT, 0.5)
    assert 0.0 < tau < 1.0  # the median change is the noise level, far below a break
    noisy = chunk_with_break(brk=13) + 0.001 * np.random.default_rng(0).normal(size=(20, 3))
    assert upcycled_horizon(noisy, 5, DT, UpcyclingConfig(enabled=True, tau=tau * 20)) == 13
    assert upcycled_horizon(noisy, 5, DT, UpcyclingConfig(enabled=True, kappa=50.0)) == 13  # prefix median


def test_executor_runs_the_upcycled_horizon():
    chunk = chunk_with_break(brk=12)
    cfg = UpcyclingConfig(enabled=True, tau=0.5)
    ex = ChunkExecutor(
        lambda obs: chunk,
        horizon=5,
        chunk_size=20,
        upcycle=lambda c, h0, prev: upcycled_horizon(c, h0, DT, cfg),
    )
    for _ in range(24):
        ex.act(None)
    assert ex.policy_calls == 2 and ex.horizons == [12, 12]
    bad = ChunkExecutor(lambda obs: chunk, horizon=5, chunk_size=20, upcycle=lambda c, h0, prev: 25)
    with pytest.raises(ValueError, match="upcycled horizon"):
        bad.act(None)


def test_replan_gate_keeps_h0_when_the_new_chunk_disagrees_with_the_discarded_tail():
    """Consecutive chunks of one smooth plan agree (D = 0): the horizon grows. A replanned chunk that moved
    away from what the previous chunk had planned (D > tolerance) runs h0 only."""
    path = np.linspace(0.0, 1.0, 200)[:, None] * np.ones((1, 3))  # one smooth straight-line plan
    step = {"t": 0, "jump": 0.0}

    def sample(obs):
        return path[step["t"] : step["t"] + 20] + step["jump"]

    cfg = UpcyclingConfig(enabled=True, tau=0.5, max_horizon=10, replan_tolerance=0.1)
    ex = ChunkExecutor(
        sample,
        horizon=3,
        chunk_size=20,
        upcycle=lambda c, h0, prev: upcycled_horizon(c, h0, DT, cfg, None, prev),
    )
    for t in range(25):
        step["t"] = t
        step["jump"] = 0.5 if t >= 20 else 0.0  # the plan changes at step 20
        ex.act(None)
    assert ex.horizons == [10, 10, 3, 10]  # the chunk sampled at step 20 disagrees: h0
    assert replan_discrepancy(path[:5], path[:5]) == 0.0
    assert replan_discrepancy(path[:5] + 0.3, path[:3], scale=np.full(3, 0.5)) == pytest.approx(0.6)
    assert upcycled_horizon(path[:20] + 1.0, 3, DT, cfg, previous=path[:17]) == 3
    assert upcycled_horizon(path[:20] + 1.0, 3, DT, cfg, previous=None) == 10  # first chunk: no gate
