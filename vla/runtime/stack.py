"""The deployment stack, built once from a :class:`~vla.runtime.config.DeployConfig`:

    chunks -> executor (sync / async, RTC, upcycling) -> takeover -> self-compensation -> safety -> robot

:class:`DeploymentStack` turns one observation into one command; the control loop around it is
:func:`vla.runtime.loop.run_episode`, the only one in the project.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vla.robot import Observation, RobotProfile
from vla.runtime.async_executor import AsyncChunkExecutor
from vla.runtime.compensation import SelfCompensator
from vla.runtime.config import DeployConfig
from vla.runtime.executor import ChunkExecutor, SampleFn
from vla.runtime.safety import SafetyLayer
from vla.runtime.takeover import Takeover
from vla.runtime.upcycling import tau_from_calibration, upcycled_horizon


@dataclass
class StackOutput:
    command: np.ndarray  # what goes to the robot (the hold target when holding)
    target: np.ndarray  # the chosen action before compensation (the hold target when holding)
    policy_action: np.ndarray | None  # the policy's proposal (None: not asked, the arm was holding)
    is_intervention: bool
    holding: bool


class DeploymentStack:
    """One deployment: see the module docstring. ``safety`` / ``compensator`` None: not in the stack."""

    def __init__(
        self,
        profile: RobotProfile,
        executor: ChunkExecutor,
        *,
        safety: SafetyLayer | None = None,
        compensator: SelfCompensator | None = None,
        interpolate: int = 1,
    ) -> None:
        self.profile, self.executor, self.interpolate = profile, executor, interpolate
        self.safety, self.compensator = safety, compensator
        self.n = profile.arm_dim
        self.policy_calls = 0  # over the episode, across the executor's resets at hand-back
        self.horizons: list[int] = []
        self._prev_cmd: np.ndarray | None = None
        self._sub, self._fresh = 0, False
        self._from: np.ndarray | None = None  # interpolation: the previous policy action
        self._to: np.ndarray | None = None  # and the current one

    @property
    def chunk_size(self) -> int:
        return self.executor.chunk_size

    @property
    def fault(self) -> str | None:
        return None if self.safety is None or self.safety.fault is None else self.safety.fault.reason

    def reset(self, obs: Observation) -> None:
        """A new episode starts from ``obs``."""
        self.executor.reset()
        self.policy_calls, self.horizons = 0, []
        if self.safety is not None:
            self.safety.reset(obs)
        self._prev_cmd = np.asarray(obs.joints, dtype=np.float64).copy()
        self._sub, self._from, self._to, self._fresh = 0, None, None, False

    def replan(self) -> None:
        """Drop the current chunk (hand-back from an operator): the next period samples a fresh one."""
        self._collect_counters()
        self.executor.reset()
        self._sub, self._from, self._to = 0, None, None

    def _collect_counters(self) -> None:
        self.policy_calls += self.executor.policy_calls
        self.horizons += list(self.executor.horizons)

    def finish(self) -> None:
        """End of episode: fold the executor's counters into the episode's."""
        self._collect_counters()
        self.executor.policy_calls, self.executor.horizons = 0, []

    def propose(self, obs: Observation) -> tuple[np.ndarray, bool]:
        """The policy's action for this period and whether it starts a fresh chunk. With ``interpolate=k``
        the executor is asked every k periods and the periods between get linear setpoints."""
        if self.interpolate == 1:
            action = np.asarray(self.executor.act(obs.policy_input()), dtype=np.float64)
            return action, self.executor.chunk_started
        if self._sub == 0:
            self._from = self._to
            self._to = np.asarray(self.executor.act(obs.policy_input()), dtype=np.float64)
            self._fresh = self.executor.chunk_started
        assert self._to is not None
        k, self._sub = self._sub, (self._sub + 1) % self.interpolate
        start = self._to if self._from is None else self._from
        return start + (k + 1) / self.interpolate * (self._to - start), self._fresh and k == 0

    def step(self, obs: Observation, now: float, takeover: Takeover) -> StackOutput:
        """One period: the command for ``obs`` at time ``now`` (the robot's clock)."""
        chosen: dict = {}

        def request() -> tuple[np.ndarray, bool]:
            d = takeover.step(obs, lambda: self.propose(obs))
            chosen["decision"] = d
            command = d.action.copy()
            if self.compensator is not None and not d.is_intervention:  # pre-compensate the arm joints
                assert self._prev_cmd is not None
                command[: self.n] = self.compensator.compensate(command[: self.n], obs.joints, self._prev_cmd)
            return command, d.fresh

        if self.safety is None:
            command, _ = request()
        else:
            command = self.safety.step(request, obs, now)
        d = chosen.get("decision")
        holding = self.safety is not None and self.safety.holding
        target = command if (holding or d is None) else d.action
        return StackOutput(
            command=command,
            target=target,
            policy_action=None if d is None else d.policy_action,
            is_intervention=False if d is None else d.is_intervention,
            holding=holding,
        )

    def observed(self, obs: Observation, command: np.ndarray, next_obs: Observation) -> None:
        """After the period: the compensator learns what ``command`` did (in the background)."""
        if self.compensator is not None:
            assert self._prev_cmd is not None
            self.compensator.record(obs.joints, command[: self.n], self._prev_cmd, next_obs.joints)
        self._prev_cmd = np.asarray(command[: self.n], dtype=np.float64).copy()

    def close(self) -> None:
        if isinstance(self.executor, AsyncChunkExecutor):
            self.executor.close()


def build_stack(
    cfg: DeployConfig,
    sample_fn: SampleFn,
    *,
    profile: RobotProfile,
    chunk_size: int,
    calibration: dict | None = None,
    dt: float | None = None,
) -> DeploymentStack:
    """Assemble the stack of ``cfg`` around ``sample_fn`` (observation -> chunk [H, A]).

    Args:
        cfg: The deployment config.
        sample_fn: A :class:`~vla.runtime.runner.PolicyRunner` or a remote policy client.
        profile: The robot's profile (limits for the safety layer, joints for compensation).
        chunk_size: H of the policy's chunks.
        calibration: The checkpoint's ``upcycling.json`` (needed when ``cfg.upcycling.enabled``).
        dt: The control period (default: the profile's); the policy steps every ``executor.interpolate``.
    """
    e = cfg.executor
    control_dt = dt or profile.dt
    dt = control_dt * e.interpolate  # the policy's step
    h = cfg.horizon or (1 if e.temporal_ensemble is not None else chunk_size)
    if h > chunk_size:
        raise ValueError(f"horizon={h} is longer than the policy's chunks (H={chunk_size})")
    upcycle = _upcycler(cfg, calibration, dt) if cfg.upcycling.enabled else None
    a = cfg.async_inference
    executor: ChunkExecutor
    if a.enabled:
        executor = AsyncChunkExecutor(
            sample_fn,
            horizon=h,
            chunk_size=chunk_size,
            dt=dt,
            simulated_delay=a.simulated_delay,
            rtc=cfg.rtc.enabled,
            rtc_soft_steps=cfg.rtc.soft_steps,
            upcycle=upcycle,
        )
    else:
        executor = ChunkExecutor(
            sample_fn,
            horizon=h,
            chunk_size=chunk_size,
            temporal_ensemble=e.temporal_ensemble,
            upcycle=upcycle,
        )
    safety = SafetyLayer(profile, cfg.safety, control_dt) if cfg.safety.enabled else None
    compensator = None
    if cfg.compensation.enabled:
        c = cfg.compensation
        compensator = SelfCompensator.load(c.load, c) if c.load else SelfCompensator(profile.arm_dim, c)
        if compensator.dims != profile.arm_dim:
            raise ValueError(
                f"compensation.load={c.load}: a model of {compensator.dims} joints for {profile.arm_dim}"
            )
    return DeploymentStack(
        profile, executor, safety=safety, compensator=compensator, interpolate=e.interpolate
    )


def _upcycler(cfg: DeployConfig, calibration: dict | None, dt: float):
    """h* for each chunk from the demo calibration (``upcycling.json`` in the checkpoint)."""
    from dataclasses import replace

    if calibration is None:
        raise FileNotFoundError(
            "upcycling.enabled needs the checkpoint's upcycling.json (written by vla-train)"
        )
    u = cfg.upcycling
    tau = u.tau if u.tau is not None else tau_from_calibration(calibration, u.quantile)
    delay = cfg.async_inference.simulated_delay or 0 if cfg.async_inference.enabled else 0
    ucfg = replace(u, tau=tau, delay_margin=max(u.delay_margin, delay))
    scale = np.asarray(calibration["scale"])
    return lambda chunk, h0, previous: upcycled_horizon(chunk, h0, dt, ucfg, scale, previous)
