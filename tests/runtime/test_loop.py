"""``run_episode`` and the deployment stack on a numpy robot: the period order, takeover and hand-back,
subscribers, holds, real-time pacing."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from toy_robot import PROFILE, ToyRobot

from vla.data.schema import ACTION, IS_INTERVENTION, POLICY_ACTION, STATE
from vla.runtime.config import DeployConfig, ExecutorConfig
from vla.runtime.loop import run_episode
from vla.runtime.safety import SafetyConfig
from vla.runtime.stack import build_stack
from vla.runtime.subscribers import FrameRecorder, TrajectoryMetrics


def goal_policy(goal=(1.0, -1.0), calls=None):
    """A chunk of H = 4 identical targets: the goal with the gripper closed."""

    def sample(obs):
        if calls is not None:
            calls.append(np.asarray(obs["state"]).copy())
        return np.tile(np.r_[goal, 0.0], (4, 1))

    return sample


def stack(sample, **deploy):
    cfg = DeployConfig(horizon=2, **deploy)
    return build_stack(cfg, sample, profile=PROFILE, chunk_size=4)


class Operator:
    """Takes over for periods [start, start + length) and drives toward ``target``."""

    def __init__(self, start=3, length=4, target=(0.5, 0.5)):
        self.start, self.length, self.target = start, length, np.r_[target, 1.0]

    def reset(self, robot):
        self.k = -1

    def engaged(self, obs):
        self.k += 1
        return self.start <= self.k < self.start + self.length

    def action(self, obs):
        return self.target.copy()


def test_the_policy_reaches_the_goal_through_the_loop():
    calls = []
    robot = ToyRobot()
    metrics = TrajectoryMetrics()
    r = run_episode(robot, stack(goal_policy(calls=calls)), seed=0, subscribers=[metrics])
    assert r.success and r.steps < 20 and r.fault is None
    assert r.policy_calls == len(calls) == -(-r.steps // 2)  # a chunk every h = 2 periods
    assert len(metrics.joints) == r.steps + 1 and metrics.jerk(PROFILE.dt) >= 0


def test_takeover_is_recorded_and_the_policy_replans_at_hand_back():
    calls = []
    robot = ToyRobot(max_steps=12, goal=(9.0, 9.0))  # never succeeds: runs all 12 periods
    rec = FrameRecorder(cameras=[])
    r = run_episode(robot, stack(goal_policy(calls=calls)), teleop=Operator(3, 4), subscribers=[rec])
    human = [bool(f[IS_INTERVENTION][0]) for f in rec.frames]
    assert human == [False] * 3 + [True] * 4 + [False] * 5
    assert (r.takeovers, r.intervention_steps) == (1, 4)
    for f, h in zip(rec.frames, human, strict=True):
        np.testing.assert_allclose(f[POLICY_ACTION], [1.0, -1.0, 0.0])  # it kept proposing
        np.testing.assert_allclose(f[ACTION], [0.5, 0.5, 1.0] if h else [1.0, -1.0, 0.0])
    # chunks at periods 0, 2, 4, 6 (the operator drives 3-6; the policy still proposes), then a fresh
    # chunk at the hand-back (period 7) instead of finishing the one planned at 6, then 9 and 11
    assert r.policy_calls == len(calls) == 7
    np.testing.assert_allclose(calls[4], rec.frames[7][STATE])  # sampled from the state the operator left


def test_a_fault_holds_the_robot_within_the_period():
    robot = ToyRobot(max_steps=6)
    bad = lambda obs: np.full((4, 3), np.nan)  # noqa: E731
    r = run_episode(robot, stack(bad, safety=SafetyConfig(mode="hold")), subscribers=[])
    assert r.fault and "policy failed: NonFiniteChunkError" in r.fault
    assert robot.holds == 6 and robot.commands == []  # never one command: held from the first period


def test_realtime_robots_are_paced_to_the_control_period():
    robot = ToyRobot(realtime=True, max_steps=25, goal=(9.0, 9.0))
    metrics = TrajectoryMetrics()
    r = run_episode(robot, stack(goal_policy()), subscribers=[metrics])
    assert r.steps == 25
    periods = np.diff(metrics.period_starts)
    assert np.median(periods) == pytest.approx(PROFILE.dt, abs=2e-3)


def test_stop_ends_the_episode():
    robot = ToyRobot(goal=(9.0, 9.0))
    n = iter(range(100))
    r = run_episode(robot, stack(goal_policy()), stop=lambda: next(n) >= 4)
    assert r.steps == 5 and r.success is False


def test_interpolation_runs_a_slower_policy_on_a_faster_loop():
    """interpolate=5: the policy is asked every 5 periods; the setpoints between move linearly."""
    calls = []

    def ramp(obs):
        calls.append(1)
        return np.stack([np.r_[0.1 * (len(calls) * 2 + i), 0.0, 0.0] for i in range(4)])

    cfg = DeployConfig(horizon=2, executor=ExecutorConfig(interpolate=5))
    s = build_stack(cfg, ramp, profile=PROFILE, chunk_size=4)
    rec = FrameRecorder(cameras=[])
    run_episode(ToyRobot(max_steps=20, goal=(9.0, 9.0)), s, subscribers=[rec])
    a = np.array([f[ACTION][0] for f in rec.frames])
    assert len(calls) == 2  # 20 periods = 4 policy actions = 2 chunks of h = 2
    np.testing.assert_allclose(a[:5], 0.2)  # the first action: no previous one to come from
    np.testing.assert_allclose(a[5:10], 0.2 + 0.1 * np.arange(1, 6) / 5)  # toward the second action, 0.3
    np.testing.assert_allclose(np.diff(a[5:]), 0.02, atol=1e-6)  # steady steps, also through the splice


def test_on_command_sees_each_period_before_the_robot_moves_on():
    """``on_command`` runs in the period, after the command and before the next observation; ``on_step``
    follows with the same output (a ROS node publishes its proposal beside the command it goes with)."""
    robot = ToyRobot(max_steps=8, goal=(9.0, 9.0))
    events = []

    class Live:
        def on_start(self, robot, obs):
            pass

        def on_command(self, index, obs, out):
            events.append(("command", index, len(robot.commands), out))

        def on_step(self, step):
            events.append(("step", step.index, len(robot.commands), step.out))

        def on_end(self, result):
            pass

    run_episode(robot, stack(goal_policy()), subscribers=[Live()])
    assert [e[:2] for e in events] == [(k, i) for i in range(8) for k in ("command", "step")]
    for cmd, step in zip(events[::2], events[1::2], strict=True):
        assert cmd[2] == cmd[1] + 1  # the period's command had gone out
        assert cmd[3] is step[3]
