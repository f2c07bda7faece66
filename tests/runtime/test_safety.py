"""The safety layer: every genuine fault holds within the period; jumps and the gripper are shaped, not
faulted; rates are judged from the measured state."""

import numpy as np
import pytest

from vla.robot import GripperModel, JointLimits, Observation, RobotProfile, Workspace
from vla.runtime import ChunkExecutor
from vla.runtime.safety import SafetyConfig, SafetyLayer

DT = 0.1


class Planar:
    """FK of a toy arm: the tool at (q0, q1, 0.5) (enough to test the workspace box)."""

    def tool_position(self, q):
        return np.array([q[0], q[1], 0.5])


PROFILE = RobotProfile(
    name="toy",
    joints=("a", "b"),
    limits=JointLimits(
        lower=(-1.0, -1.0), upper=(1.0, 1.0), max_velocity=(2.0, 2.0), max_acceleration=(10.0, 10.0)
    ),
    gripper=GripperModel(closed=0.0, open=0.04, max_speed=0.1),
    control_hz=1 / DT,
    workspace=Workspace(lower=(-0.9, -0.9, 0.0), upper=(0.9, 0.9, 1.0)),
    kinematics=Planar(),
)
Q = np.array([0.1, -0.2])


def obs(q=Q, t=0.0, vel=None, gripper=0.04):
    return Observation(joints=np.asarray(q, float), joint_stamp=t, gripper=gripper, joint_velocities=vel)


def layer(**kw):
    s = SafetyLayer(PROFILE, SafetyConfig(mode=kw.pop("mode", "hold"), **kw))
    s.reset(obs())
    return s


def cmd(arm, g=0.04):
    return np.r_[arm, g]


def test_a_smooth_stream_passes_unchanged():
    s = layer()
    for k in range(1, 6):  # 0.05 rad per period = 0.5 rad/s, accelerating 5 rad/s^2 at the start
        target = cmd(Q + 0.05 * k)
        out = s.step(lambda target=target, k=k: (target, k == 1), obs(), now=0.0)
        np.testing.assert_allclose(out, target)
    assert not s.holding and s.interpolated == 0


@pytest.mark.parametrize(
    ("target", "stale_by", "reason"),
    [
        (cmd(Q + 0.01), 0.3, "stale observation: joints 300 ms old"),
        (cmd([np.nan, 0.0]), 0.0, "non-finite"),
        (cmd([1.5, 0.0]), 0.0, "a target 1.5000 outside"),
        (np.zeros(5), 0.0, "shape"),
        (cmd([0.95, 0.0]), 0.0, "workspace: tool target x=0.950 m above 0.900"),
        (RuntimeError("inference worker died"), 0.0, "policy failed: RuntimeError"),
    ],
)
def test_each_fault_holds_at_the_measured_position(target, stale_by, reason):
    s = layer()

    def request():
        if isinstance(target, Exception):
            raise target
        return target, False

    out = s.step(request, obs(t=-stale_by), now=0.0)
    np.testing.assert_allclose(out, cmd(Q))  # held in the same period: measured arm, last gripper command
    assert s.holding and reason in s.fault.reason
    # latched: later good actions are ignored, the hold target stays, the policy is not even called
    calls = []
    out = s.step(lambda: calls.append(1) or (cmd(Q + 0.01), False), obs(Q + 0.05), now=0.1)
    np.testing.assert_allclose(out, cmd(Q))
    assert not calls
    s.reset(obs())
    assert not s.holding


def test_velocity_beyond_twice_the_limit_within_a_stream_holds():
    s = layer()
    s.step(lambda: (cmd(Q), True), obs(), now=0.0)
    out = s.step(lambda: (cmd(Q + np.array([0.5, 0.0])), False), obs(), now=0.1)  # 5 rad/s > 2 x 2
    assert s.holding and "a velocity 5.000 rad/s beyond 2 x its limit 2.000" in s.fault.reason
    np.testing.assert_allclose(out, cmd(Q))


def test_velocity_between_the_limit_and_twice_it_is_shaped_to_the_limit():
    """The arm never receives a command beyond its limit; a modest overshoot is followed a step late."""
    s = layer()
    s.reset(obs(vel=np.array([2.0, 0.0])))  # already moving at the limit
    s.step(lambda: (cmd(Q + [0.2, 0.0]), True), obs(), now=0.0)
    out = s.step(lambda: (cmd(Q + [0.5, 0.0]), False), obs(t=0.1), now=0.1)  # 3 rad/s: 1.5 x
    assert not s.holding and out[0] == pytest.approx(Q[0] + 0.4)  # 2 rad/s, the limit
    out = s.step(lambda: (cmd(Q + [0.5, 0.0]), False), obs(t=0.2), now=0.2)
    assert out[0] == pytest.approx(Q[0] + 0.5)  # caught up


def test_a_fresh_jump_is_interpolated_within_the_limits_not_faulted():
    """A new chunk starting 0.6 rad away: the output walks there within a_max and v_max, never past it."""
    s = layer()
    s.step(lambda: (cmd(Q), True), obs(), now=0.0)
    goal = cmd(Q + np.array([0.6, 0.0]))
    outs = [s.step(lambda k=k: (goal, k == 0), obs(t=0.1 * k), now=0.1 * k)[0] for k in range(8)]
    assert not s.holding and s.interpolated > 0
    v = np.diff([Q[0], *outs]) / DT
    assert np.all(np.abs(v) <= 2.0 + 1e-9)  # velocity limit
    assert np.all(np.diff(np.r_[0.0, v])[v > 0][:3] <= 10.0 * DT + 1e-9)  # speeding up: a_max
    assert outs[-1] == pytest.approx(goal[0]) and max(outs) <= goal[0] + 1e-12  # arrives, no overshoot


def test_rates_are_judged_from_the_measured_velocity_at_reset():
    """An arm already moving at 1 rad/s may keep moving at 1 rad/s; from rest the same step is shaped."""
    step = cmd(Q + 0.1)  # 1 rad/s
    moving = SafetyLayer(PROFILE, SafetyConfig(mode="hold"))
    moving.reset(obs(vel=np.array([1.0, 1.0])))
    np.testing.assert_allclose(moving.step(lambda: (step, True), obs(), now=0.0), step)
    rest = layer()
    out = rest.step(lambda: (step, True), obs(), now=0.0)
    np.testing.assert_allclose(out[:2], Q + 10.0 * DT * DT)  # a_max dt per period from rest
    assert not rest.holding


def test_the_gripper_has_its_own_model():
    """Closing 0.04 m in one period is a normal grasp command, not a 0.4 m/s joint fault; the target is
    clipped to the hand's range."""
    s = layer()
    s.step(lambda: (cmd(Q, 0.04), True), obs(), now=0.0)
    out = s.step(lambda: (cmd(Q, 0.0), False), obs(), now=0.1)
    assert not s.holding and out[2] == 0.0
    out = s.step(lambda: (cmd(Q, 0.07), False), obs(t=0.2), now=0.2)
    assert not s.holding and out[2] == 0.04


def test_clamp_mode_shapes_within_stream_speed_instead_of_holding():
    s = layer(mode="clamp")
    s.step(lambda: (cmd(Q), True), obs(), now=0.0)
    out = s.step(lambda: (cmd(Q + np.array([0.3, 0.0])), False), obs(), now=0.1)
    assert not s.holding and Q[0] < out[0] <= Q[0] + 10.0 * DT * DT + 1e-12


def test_nan_chunk_from_the_executor_ends_in_a_hold():
    ex = ChunkExecutor(lambda o: np.full((4, 3), np.nan), horizon=2, chunk_size=4)
    s = layer()
    out = s.step(lambda: (ex.act(None), ex.chunk_started), obs(), now=0.0)
    np.testing.assert_allclose(out, cmd(Q))
    assert "NonFiniteChunkError" in s.fault.reason


def test_config_is_validated():
    with pytest.raises(ValueError, match="mode='maybe'"):
        SafetyConfig(mode="maybe")
    with pytest.raises(ValueError, match="stale_after_s"):
        SafetyConfig(stale_after_s=0)
