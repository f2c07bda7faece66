"""``run_episode``: the only control loop in the project (sim evaluation, sim rollouts, the ROS 2 node).

One period (openpi's ``Runtime._step``, with our deployment layers)::

    obs = robot.observe()                      # images and joints, each with its capture stamp
    out = stack.step(obs, robot.now(), takeover)   # executor -> takeover -> compensation -> safety
    robot.command(out.command)  or  robot.hold()   # a fault holds within the period
    subscribers.on_command(index, obs, out)    # optional: live outputs in the period (ROS topics)
    (realtime robots: sleep to the next period)
    subscribers.on_step(...)                   # recorder, video, metrics, intervention recorder

A simulator advances one period in ``command``/``hold`` (``capabilities.realtime = False``); a real robot
runs on the wall clock and the loop paces itself (coarse sleep, then a short spin to the deadline), with
Python's cyclic garbage collector paused for the episode: a generation-2 collection of a large heap
stalls a period by milliseconds (measured: p99 period jitter 1.9 ms with it, 0.1 ms without,
``benchmarks/control_loop.py``). Objects from before the episode are frozen, and cycles made during it
are collected when it ends.
The episode ends when the robot reports it done (a simulator's termination or time limit), at
``max_steps``, or when ``stop()`` says so (an operator's stop service).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from vla.robot import EpisodeStatus, Observation, Robot, Teleoperator
from vla.runtime.stack import DeploymentStack, StackOutput
from vla.runtime.takeover import Takeover


@dataclass
class StepRecord:
    index: int  # period within the episode
    obs: Observation  # what the decision saw
    out: StackOutput  # command, target, the policy's proposal, intervention flag, holding
    next_obs: Observation  # after the period
    status: EpisodeStatus  # after the period
    done: bool  # the last period of the episode
    wall_time: float  # time.perf_counter() at the start of the period
    work_s: float = 0.0  # the period's own work: decide and command (before a real-time loop sleeps)


@dataclass
class EpisodeResult:
    seed: int | None
    steps: int
    success: bool | None  # None: the robot cannot tell (no operator mark either)
    fault: str | None  # the safety layer's fault (the arm held from then on)
    policy_calls: int
    takeovers: int
    intervention_steps: int
    horizons: list[int] = field(default_factory=list)  # executed horizon per chunk with upcycling
    wall_s: float = 0.0
    instruction: str = ""


class Subscriber(Protocol):
    """Watches an episode: recording, video, metrics. Must not block the loop for long.

    A subscriber may also define ``on_command(index, obs, out)``: it is called in the period, right after
    the command went out (``on_step`` comes a period later, with the next observation), for outputs that
    must be timed with the command, such as the ROS node's ``~/policy_action``.
    """

    def on_start(self, robot: Robot, obs: Observation) -> None: ...

    def on_step(self, step: StepRecord) -> None: ...

    def on_end(self, result: EpisodeResult) -> None: ...


def sleep_until(deadline: float, spin_s: float = 0.0015) -> None:
    """Sleep coarsely, then spin the last ``spin_s`` (OS sleep granularity and wake-up latency)."""
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            return
        if left > spin_s:
            time.sleep(left - spin_s)


@contextmanager
def paused_gc(enabled: bool) -> Iterator[None]:
    """No cyclic garbage collection inside ``with`` (reference counting still frees memory).

    Nothing is collected on entry: a full collection in a process that holds a policy takes ~0.3 s with
    the GIL held, and the threads that deliver the robot's inputs (ROS callbacks) would stall behind it
    just as the episode starts. The objects alive on entry are frozen instead (never scanned inside), and
    whatever is garbage among them is collected after the episode, when they are unfrozen.
    """
    if not enabled:
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


def run_episode(
    robot: Robot,
    stack: DeploymentStack,
    *,
    seed: int | None = None,
    max_steps: int | None = None,
    teleop: Teleoperator | None = None,
    subscribers: Sequence[Subscriber] = (),
    stop: Callable[[], bool] | None = None,
) -> EpisodeResult:
    """Run one episode of ``stack`` on ``robot``; see the module docstring."""
    t0 = time.perf_counter()
    realtime = robot.capabilities.realtime
    with paused_gc(realtime):  # no cyclic GC pause inside the episode
        robot.reset(seed)
        obs = robot.observe()
        stack.reset(obs)
        takeover = Takeover(teleop, stack.replan)
        takeover.reset(robot)
        for s in subscribers:
            s.on_start(robot, obs)
        live = [s.on_command for s in subscribers if hasattr(s, "on_command")]
        period = robot.profile.dt
        deadline = time.perf_counter()
        success: bool | None = None
        steps = 0
        while True:
            wall = time.perf_counter()
            out = stack.step(obs, robot.now(), takeover)
            if out.holding:
                robot.hold()
            else:
                robot.command(out.command)
            for on_command in live:
                on_command(steps, obs, out)
            work = time.perf_counter() - wall
            if realtime:
                deadline += period
                sleep_until(deadline)
            next_obs = robot.observe()
            stack.observed(obs, out.command, next_obs)
            status = robot.status()
            steps += 1
            if status.success is not None:
                success = bool(success) or status.success
            done = status.done or (max_steps is not None and steps >= max_steps) or bool(stop and stop())
            record = StepRecord(steps - 1, obs, out, next_obs, status, done, wall, work)
            for s in subscribers:
                s.on_step(record)
            obs = next_obs
            if done:
                break
    stack.finish()
    result = EpisodeResult(
        seed=seed,
        steps=steps,
        success=success,
        fault=stack.fault,
        policy_calls=stack.policy_calls,
        takeovers=takeover.takeovers,
        intervention_steps=takeover.intervention_steps,
        horizons=list(stack.horizons),
        wall_s=time.perf_counter() - t0,
        instruction=obs.instruction,
    )
    for s in subscribers:
        s.on_end(result)
    return result
