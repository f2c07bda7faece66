"""Asynchronous execution: time-aligned splicing under an inference delay, no blocking, crash -> hold."""

import time

import numpy as np
import pytest

from vla.robot import JointLimits, Observation, RobotProfile
from vla.runtime.async_executor import AsyncChunkExecutor
from vla.runtime.safety import SafetyConfig, SafetyLayer
from vla.runtime.upcycling import UpcyclingConfig, upcycled_horizon

H = 10


class Clock:
    """A policy whose chunk planned at step s says "at step s + i be at s + i": a time ramp."""

    def __init__(self):
        self.step = 0

    def __call__(self, obs, prefix=None, delay=0):
        s = obs  # the observation is the step it was taken at
        return np.arange(s, s + H, dtype=float)[:, None].repeat(2, axis=1)


@pytest.mark.parametrize("delay", [0, 2, 4])
def test_simulated_delay_splices_without_a_jump(delay):
    ex = AsyncChunkExecutor(Clock(), horizon=5, chunk_size=H, dt=0.1, simulated_delay=delay)
    executed = [ex.act(t)[0] for t in range(40)]
    np.testing.assert_array_equal(executed, np.arange(40))  # the executed trajectory is the planned time
    assert ex.starved == 0 and set(ex.splice_offsets) == {delay}
    assert ex.policy_calls == 1 + len(ex.splice_offsets) and ex.policy_calls <= 40 // 5 + 2


def test_starved_executor_holds_the_last_action():
    ex = AsyncChunkExecutor(Clock(), horizon=9, chunk_size=H, dt=0.1, simulated_delay=5)
    ex.delay_steps = 1  # under-estimated delay: the request goes out too late on purpose
    out = [ex.act(t)[0] for t in range(16)]
    assert out[:10] == list(range(10))
    assert out[10:13] == [9.0, 9.0, 9.0] and ex.starved == 3  # the last action held
    assert out[13:] == [13.0, 14.0, 15.0]  # then back on time


def test_rtc_requests_carry_the_committed_prefix():
    seen = []

    def fn(obs, prefix, delay):
        seen.append((None if prefix is None else len(prefix), delay))
        return Clock()(obs)

    ex = AsyncChunkExecutor(fn, horizon=5, chunk_size=H, dt=0.1, simulated_delay=2, rtc=True)
    for t in range(12):
        ex.act(t)
    assert seen[0] == (None, 0) and seen[1] == (H - 3, 2)  # requested with 2 of the 5 actions still to run
    seen.clear()
    ex = AsyncChunkExecutor(
        fn, horizon=5, chunk_size=H, dt=0.1, simulated_delay=2, rtc=True, rtc_soft_steps=1
    )
    for t in range(12):
        ex.act(t)
    assert seen[1] == (2 + 1, 2)  # the 2 committed actions and 1 more of the old tail, not the whole tail


def test_background_inference_does_not_block_the_control_loop():
    def slow(obs):
        time.sleep(0.2)
        return Clock()(obs)

    ex = AsyncChunkExecutor(slow, horizon=5, chunk_size=H, dt=0.01)
    ex.act(0)  # the first chunk is blocking by design
    worst = 0.0
    for t in range(1, 8):
        t0 = time.perf_counter()
        ex.act(t)
        worst = max(worst, time.perf_counter() - t0)
    assert worst < 0.1  # the 0.2 s inference runs in the worker
    ex.close()


def test_worker_crash_ends_in_a_hold():
    calls = {"n": 0}

    def crashing(obs):
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("CUDA error: device lost")
        return np.zeros((H, 2))

    ex = AsyncChunkExecutor(crashing, horizon=5, chunk_size=H, dt=0.1, simulated_delay=None)
    limits = JointLimits([-1, -1], [1, 1], [10, 10], [1000, 1000])
    profile = RobotProfile("toy", ("a", "b"), limits, gripper=None, control_hz=10.0)
    safety = SafetyLayer(profile, SafetyConfig(mode="hold"))
    q = np.array([0.3, 0.3])
    safety.reset(Observation(q, 0.0))
    outs = []
    for t in range(30):
        obs = Observation(q, joint_stamp=t * 0.1)
        outs.append(safety.step(lambda t=t: (ex.act(t), ex.chunk_started), obs, now=t * 0.1))
        time.sleep(0.005)
        if safety.holding:
            break
    assert safety.holding and "device lost" in safety.fault.reason
    np.testing.assert_allclose(outs[-1], q)
    ex.close()


def _upcycling(sample_fn, cfg):
    """An async executor (h0 = 3, simulated delay 2) whose horizon is upcycled with ``cfg``."""
    return AsyncChunkExecutor(
        sample_fn,
        horizon=3,
        chunk_size=H,
        dt=0.1,
        simulated_delay=2,
        upcycle=lambda c, h0, prev: upcycled_horizon(c, h0, 0.1, cfg, None, prev),
    )


def test_upcycling_counts_from_the_splice_point():
    """A chunk planned at step s follows the clock up to its index 6 and then stops (a velocity break).
    Spliced in 2 steps late, it must run only up to the break: h* is measured on the chunk from the
    splice point on, not from its start (which would run 2 actions past the break)."""

    def ramp_then_stop(obs):
        return (obs + np.minimum(np.arange(H), 6)).astype(float)[:, None].repeat(2, axis=1)

    ex = _upcycling(ramp_then_stop, UpcyclingConfig(enabled=True, tau=0.5))
    executed = [ex.act(t)[0] for t in range(30)]
    np.testing.assert_array_equal(executed, np.arange(30))  # never past a break, never a jump
    assert ex.horizons[0] == 6 and set(ex.horizons[1:]) == {4} and set(ex.splice_offsets) == {2}


def test_async_replan_gate_keeps_h0_when_the_spliced_chunk_disagrees():
    """The replan gate compares the spliced chunk with what the old chunk had planned for the same steps:
    the chunk that moved runs h0 only; the next one agrees with it again and is upcycled."""
    calls = {"n": 0}

    def changes_its_mind(obs):
        calls["n"] += 1
        jump = 0.5 if calls["n"] >= 3 else 0.0  # from the third chunk on, the plan has moved
        return Clock()(obs) * 0.01 + jump

    ex = _upcycling(
        changes_its_mind, UpcyclingConfig(enabled=True, tau=0.5, max_horizon=6, replan_tolerance=0.1)
    )
    for t in range(20):
        ex.act(t)
    assert ex.horizons[:4] == [6, 6, 3, 6]
