"""Every safety fault ends in a hold at the measured position, within the period it happens, with a reason."""

import numpy as np
import pytest

from vla.runtime import ChunkExecutor
from vla.runtime.safety import JointLimits, SafetyConfig, SafetyLayer

DT = 0.02
LIMITS = JointLimits(
    lower=[-1.0, -1.0], upper=[1.0, 1.0], max_velocity=[2.0, 2.0], max_acceleration=[50.0, 50.0]
)
Q = np.array([0.1, -0.2])


def layer(**kw):
    s = SafetyLayer(LIMITS, SafetyConfig(**kw), DT)
    s.reset(Q)
    return s


def ok_action():
    return Q + 0.01


def test_nominal_commands_pass_unchanged():
    s = layer()
    out = s.step(ok_action, Q, obs_time=0.0, now=0.01)
    np.testing.assert_allclose(out, Q + 0.01)
    assert not s.holding


@pytest.mark.parametrize(
    ("act", "obs_time", "reason"),
    [
        (ok_action, -1.0, "stale observation"),
        (lambda: np.array([np.nan, 0.0]), 0.0, "non-finite"),
        (lambda: np.array([1.5, 0.0]), 0.0, "outside"),
        (lambda: Q + np.array([0.2, 0.0]), 0.0, "velocity"),  # 0.2 rad in 20 ms = 10 rad/s
        (lambda: (_ for _ in ()).throw(RuntimeError("inference worker died")), 0.0, "policy failed"),
    ],
)
def test_each_fault_holds_at_the_measured_position(act, obs_time, reason):
    s = layer()
    out = s.step(act, Q, obs_time=obs_time, now=0.01)
    np.testing.assert_allclose(out, Q)  # held in the same period
    assert s.holding and reason in s.fault.reason
    # latched: later good actions are ignored, the hold target stays, the policy is not even called
    calls = []
    out = s.step(lambda: calls.append(1) or ok_action(), Q + 0.05, obs_time=0.02, now=0.03)
    np.testing.assert_allclose(out, Q)
    assert not calls
    s.reset(Q)
    assert not s.holding


def test_nan_chunk_from_the_executor_ends_in_a_hold():
    ex = ChunkExecutor(lambda obs: np.full((4, 2), np.nan), horizon=2, chunk_size=4)
    s = layer()
    out = s.step(lambda: ex.act(None), Q, obs_time=0.0, now=0.0)
    np.testing.assert_allclose(out, Q)
    assert "NonFiniteChunkError" in s.fault.reason


def test_clamp_mode_rate_limits_instead_of_holding():
    s = layer(on_rate_violation="clamp")
    out = s.step(lambda: Q + np.array([0.2, 0.0]), Q, obs_time=0.0, now=0.0)
    assert not s.holding
    assert abs(out[0] - Q[0]) <= 50.0 * DT * DT + 1e-12  # acceleration-limited from rest
    assert out[0] > Q[0]
