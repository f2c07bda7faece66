"""The safety layer between the chunk executor and the robot: every fault ends in a hold.

Checks, each control period, in order:

1. **watchdog**: the observation is older than ``stale_after_s`` (a stale camera frame, a dropped
   joint-state message) -> fault;
2. **policy**: the executor raised (a NaN/inf chunk, a crashed inference worker) -> fault;
3. **finite**: the action has NaN/inf -> fault;
4. **position**: a joint target outside [lower - tol, upper + tol] -> fault;
5. **velocity / acceleration**: the implied joint velocity (a - a_prev) / dt or acceleration beyond the
   profile's limits -> fault (``on_rate_violation="hold"``) or the step is scaled back inside the limit
   (``"clamp"``).

A fault latches: from that period on, :meth:`SafetyLayer.filter` returns the hold target (the measured
joint position at the fault) and ``fault`` names the reason, until :meth:`SafetyLayer.reset`. The hold is
decided in the same period as the fault, so it reaches the robot within one control period.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class JointLimits:
    """A robot profile's limits, per action dimension (joint targets; the gripper is one more dim)."""

    lower: list[float]
    upper: list[float]
    max_velocity: list[float]  # units / s
    max_acceleration: list[float]  # units / s^2

    def __post_init__(self) -> None:
        n = len(self.lower)
        if not (len(self.upper) == len(self.max_velocity) == len(self.max_acceleration) == n):
            raise ValueError(
                "joint limits: lower, upper, max_velocity, max_acceleration need the same length"
            )
        if np.any(np.asarray(self.upper) < np.asarray(self.lower)):
            raise ValueError("joint limits: upper < lower")


@dataclass
class SafetyConfig:
    stale_after_s: float = 0.25  # observation age that trips the watchdog
    position_tolerance: float = 1e-3
    on_rate_violation: str = "hold"  # or "clamp"

    def __post_init__(self) -> None:
        if self.on_rate_violation not in ("hold", "clamp"):
            raise ValueError(f"on_rate_violation={self.on_rate_violation!r}: use 'hold' or 'clamp'")
        if self.stale_after_s <= 0:
            raise ValueError(f"stale_after_s={self.stale_after_s} must be > 0")


@dataclass
class Fault:
    reason: str
    step: int
    time: float


class SafetyLayer:
    """Filters every command; see the module docstring."""

    def __init__(self, limits: JointLimits, cfg: SafetyConfig, dt: float) -> None:
        self.lo = np.asarray(limits.lower, dtype=np.float64)
        self.hi = np.asarray(limits.upper, dtype=np.float64)
        self.vmax = np.asarray(limits.max_velocity, dtype=np.float64)
        self.amax = np.asarray(limits.max_acceleration, dtype=np.float64)
        self.cfg, self.dt = cfg, dt
        self.reset(None)

    def reset(self, q: np.ndarray | None) -> None:
        """Clear any fault; ``q`` is the measured position the next command moves from."""
        self.fault: Fault | None = None
        self.hold_target: np.ndarray | None = None
        self.prev = None if q is None else np.asarray(q, dtype=np.float64).copy()
        self.prev_vel = np.zeros_like(self.lo)
        self.steps = 0

    @property
    def holding(self) -> bool:
        return self.fault is not None

    def trip(self, reason: str, q: np.ndarray, now: float) -> np.ndarray:
        """Latch a fault and return the hold target (the measured position)."""
        if self.fault is None:
            self.fault = Fault(reason, self.steps, now)
            self.hold_target = np.asarray(q, dtype=np.float64).copy()
        assert self.hold_target is not None
        return self.hold_target.copy()

    def step(self, act: Callable[[], np.ndarray], q: np.ndarray, obs_time: float, now: float) -> np.ndarray:
        """One control period: ``act()`` gives the policy's action (not called when holding or stale);
        ``q`` is the measured joint position; returns the command to send."""
        self.steps += 1
        if self.fault is not None:
            return self.trip(self.fault.reason, q, now)
        age = now - obs_time
        if age > self.cfg.stale_after_s:
            return self.trip(
                f"stale observation: {age * 1000:.0f} ms old (limit {self.cfg.stale_after_s * 1000:.0f} ms)",
                q,
                now,
            )
        try:
            action = np.asarray(act(), dtype=np.float64)
        except Exception as exc:  # a NaN chunk, a crashed inference worker: hold, never propagate
            return self.trip(f"policy failed: {type(exc).__name__}: {exc}", q, now)
        return self.filter(action, q, now)

    def filter(self, action: np.ndarray, q: np.ndarray, now: float) -> np.ndarray:
        if self.fault is not None:
            return self.trip(self.fault.reason, q, now)
        a = np.asarray(action, dtype=np.float64)
        if a.shape != self.lo.shape:
            return self.trip(f"action has shape {a.shape}, the robot takes {self.lo.shape}", q, now)
        if not np.all(np.isfinite(a)):
            return self.trip(f"non-finite action at dims {np.flatnonzero(~np.isfinite(a)).tolist()}", q, now)
        tol = self.cfg.position_tolerance
        out = (a < self.lo - tol) | (a > self.hi + tol)
        if out.any():
            j = int(np.flatnonzero(out)[0])
            return self.trip(
                f"joint {j} target {a[j]:.4f} outside [{self.lo[j]:.4f}, {self.hi[j]:.4f}]", q, now
            )
        prev = self.prev if self.prev is not None else np.asarray(q, dtype=np.float64)
        vel = (a - prev) / self.dt
        acc = (vel - self.prev_vel) / self.dt
        over_v, over_a = np.abs(vel) > self.vmax, np.abs(acc) > self.amax
        if over_v.any() or over_a.any():
            if self.cfg.on_rate_violation == "hold":
                j = int(np.flatnonzero(over_v | over_a)[0])
                kind = "velocity" if over_v[j] else "acceleration"
                value = vel[j] if over_v[j] else acc[j]
                limit = self.vmax[j] if over_v[j] else self.amax[j]
                return self.trip(f"joint {j} {kind} {value:.3f} beyond {limit:.3f}", q, now)
            vel = np.clip(vel, self.prev_vel - self.amax * self.dt, self.prev_vel + self.amax * self.dt)
            vel = np.clip(vel, -self.vmax, self.vmax)
            a = prev + vel * self.dt
        self.prev, self.prev_vel = a.copy(), vel
        return a
