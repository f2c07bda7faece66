"""The safety layer between the policy (or the operator) and the robot: every fault ends in a hold.

Each control period the layer sees the requested target ``r_t`` = [arm joint targets, gripper target] and
the observation the decision was made on, and either passes a command or latches a **fault** (the arm
holds its measured position, the gripper its last command, until :meth:`SafetyLayer.reset`). Faults, in
the order checked:

1. **watchdog**: the oldest input of the observation (a camera frame, the joint state) is older than
   ``stale_after_s`` on the robot's clock;
2. **policy**: producing the request raised (a NaN/inf chunk, a crashed inference worker);
3. **finite**: the request has NaN/inf, or the wrong length;
4. **position**: an arm target outside the profile's [lower - tol, upper + tol];
5. **workspace**: the tool point of the target (the profile's forward kinematics) leaves the profile's
   Cartesian box;
6. **velocity** (``mode="hold"``): within one continuous stream of commands, the requested motion itself,
   ``|r_t - r_{t-1}| / dt``, is more than ``velocity_fault_ratio`` (2) times a joint's velocity limit: the
   arm would fall more than a whole period behind in one step, a stream it cannot follow (a policy gone
   wrong). Between 1 and 2 times the limit the request is shaped (below), so the arm never receives a
   command beyond its limit: a trained policy's chunks reach 1.1-1.25 x on the Panda's wrist (joint 7) in a
   few percent of pick-and-place episodes (docs/results.md), normal motion the arm follows a step late.

What is **shaped, not faulted**: the start of a new stream -- the first command after a reset, a fresh
chunk's first action, the switch between operator and policy -- may jump. The layer interpolates such
jumps within the limits: the output ``y_t`` moves toward ``r_t`` with a velocity clipped to the limit and,
while speeding up, to ``|v_t - v_base| <= a_max dt`` (``v_base``: the previous output velocity, measured
joint velocities at reset, 0 after a reversal). Slowing down is never limited, so the output never passes
its target. In ``mode="clamp"`` no velocity faults: every request is shaped. The
gripper has its own model (:class:`~vla.robot.GripperModel`): its target is clipped to the device's range
and its own controller sets the speed; the arm's rate limits do not apply to it.

Rates are judged against the measured state at reset (positions and, when the robot measures them,
velocities), not against a zero velocity. The hold is decided in the period of the fault, so it reaches
the robot within one control period.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vla.robot import Observation, RobotProfile

MODES = ("off", "hold", "clamp")


@dataclass
class SafetyConfig:
    mode: str = "off"  # "off" (no layer), "hold" (every fault holds), "clamp" (rate limits shape instead)
    stale_after_s: float = 0.25  # observation age that trips the watchdog
    position_tolerance: float = 1e-3  # rad beyond a joint's range still accepted (numerics)
    velocity_fault_ratio: float = 2.0  # hold mode: within-stream speed beyond this x the limit faults
    workspace: bool = True  # enforce the profile's Cartesian box (when it has one and kinematics)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"safety mode={self.mode!r}: use one of {MODES}")
        if self.stale_after_s <= 0 or self.position_tolerance < 0 or self.velocity_fault_ratio < 1:
            raise ValueError(
                f"safety: stale_after_s={self.stale_after_s} > 0, position_tolerance="
                f"{self.position_tolerance} >= 0 and velocity_fault_ratio={self.velocity_fault_ratio} >= 1"
            )

    @property
    def enabled(self) -> bool:
        return self.mode != "off"


@dataclass
class Fault:
    reason: str
    step: int
    time: float


Request = Callable[[], tuple[np.ndarray, bool]]
"""() -> (target [A], fresh): fresh marks the start of a new stream (reset, new chunk, operator switch)."""


class SafetyLayer:
    """Filters every command; see the module docstring."""

    def __init__(self, profile: RobotProfile, cfg: SafetyConfig, dt: float | None = None) -> None:
        lim = profile.limits
        self.profile, self.cfg = profile, cfg
        self.dt = dt or profile.dt
        self.n = profile.arm_dim
        self.lo, self.hi = np.asarray(lim.lower), np.asarray(lim.upper)
        self.vmax, self.amax = np.asarray(lim.max_velocity), np.asarray(lim.max_acceleration)
        self.kinematics = profile.kinematics if (cfg.workspace and profile.workspace) else None
        self.reset(None)

    @property
    def action_dim(self) -> int:
        return self.profile.action_dim

    def reset(self, obs: Observation | None) -> None:
        """Clear any fault; the next command moves from ``obs``'s measured joints (and velocities)."""
        self.fault: Fault | None = None
        self.steps = 0
        self.interpolated = 0  # periods in which a jump was shaped
        self.request: np.ndarray | None = None  # r_{t-1}, arm
        self.out: np.ndarray | None = None if obs is None else np.asarray(obs.joints, dtype=np.float64).copy()
        vel = None if obs is None else obs.joint_velocities
        self.vel = np.zeros(self.n) if vel is None else np.asarray(vel, dtype=np.float64).copy()
        self.gripper_cmd = None if obs is None else obs.gripper
        self.hold_target: np.ndarray | None = None

    @property
    def holding(self) -> bool:
        return self.fault is not None

    def trip(self, reason: str, obs: Observation, now: float) -> np.ndarray:
        """Latch a fault (the first reason is kept) and return the hold target."""
        if self.fault is None:
            self.fault = Fault(reason, self.steps, now)
            g = [] if self.profile.gripper is None else [self._gripper_hold(obs)]
            self.hold_target = np.r_[np.asarray(obs.joints, dtype=np.float64), g]
        assert self.hold_target is not None
        return self.hold_target.copy()

    def _gripper_hold(self, obs: Observation) -> float:
        if self.gripper_cmd is not None:
            return float(self.gripper_cmd)
        return float(obs.gripper) if obs.gripper is not None else self.profile.gripper.open  # type: ignore[union-attr]

    def step(self, request: Request, obs: Observation, now: float) -> np.ndarray:
        """One control period: ``request()`` gives the target (not called when holding or stale)."""
        self.steps += 1
        if self.fault is not None:
            return self.trip(self.fault.reason, obs, now)
        age = now - obs.stamp
        if age > self.cfg.stale_after_s:
            limit = self.cfg.stale_after_s * 1000
            return self.trip(
                f"stale observation: {obs.stalest()} {age * 1000:.0f} ms old (limit {limit:.0f} ms)", obs, now
            )
        try:
            target, fresh = request()
        except Exception as exc:  # a NaN chunk, a crashed inference worker: hold, never propagate
            return self.trip(f"policy failed: {type(exc).__name__}: {exc}", obs, now)
        return self.filter(target, obs, now, fresh=fresh)

    def filter(self, target: np.ndarray, obs: Observation, now: float, *, fresh: bool = False) -> np.ndarray:
        if self.fault is not None:
            return self.trip(self.fault.reason, obs, now)
        a = np.asarray(target, dtype=np.float64)
        if a.shape != (self.action_dim,):
            return self.trip(f"action has shape {a.shape}, the robot takes ({self.action_dim},)", obs, now)
        if not np.all(np.isfinite(a)):
            return self.trip(
                f"non-finite action at dims {np.flatnonzero(~np.isfinite(a)).tolist()}", obs, now
            )
        arm = a[: self.n]
        tol = self.cfg.position_tolerance
        out = (arm < self.lo - tol) | (arm > self.hi + tol)
        if out.any():
            j = int(np.flatnonzero(out)[0])
            name = self.profile.joints[j]
            return self.trip(
                f"{name} target {arm[j]:.4f} outside [{self.lo[j]:.4f}, {self.hi[j]:.4f}]", obs, now
            )
        if self.kinematics is not None:
            assert self.profile.workspace is not None
            where = self.profile.workspace.violation(self.kinematics.tool_position(arm))
            if where is not None:
                return self.trip(f"workspace: tool target {where}", obs, now)
        if self.out is None:  # no reset observation: start from the measured joints
            self.out = np.asarray(obs.joints, dtype=np.float64).copy()
        if self.request is not None and not fresh and self.cfg.mode == "hold":
            v_req = (arm - self.request) / self.dt
            ratio = self.cfg.velocity_fault_ratio
            over = np.abs(v_req) > self.vmax * ratio
            if over.any():
                j = int(np.flatnonzero(over)[0])
                return self.trip(
                    f"{self.profile.joints[j]} velocity {v_req[j]:.3f} rad/s beyond {ratio:g} x its limit "
                    f"{self.vmax[j]:.3f}",
                    obs,
                    now,
                )
        y = self._shape(arm)
        self.request = arm.copy()
        if self.profile.gripper is None:
            return y
        self.gripper_cmd = self.profile.gripper.clip(float(a[self.n]))
        return np.r_[y, self.gripper_cmd]

    def _shape(self, arm: np.ndarray) -> np.ndarray:
        """Move the output toward ``arm`` within the velocity and (speeding up) acceleration limits."""
        assert self.out is not None
        dt = self.dt
        v_des = (arm - self.out) / dt
        slowing = (v_des * self.vel > 0) & (np.abs(v_des) <= np.abs(self.vel))
        base = np.where(v_des * self.vel > 0, self.vel, 0.0)
        v = np.where(slowing, v_des, np.clip(v_des, base - self.amax * dt, base + self.amax * dt))
        v = np.clip(v, -self.vmax, self.vmax)
        if not np.allclose(v, v_des, rtol=0, atol=1e-9):
            self.interpolated += 1
        self.out = self.out + v * dt
        self.vel = v
        return self.out.copy()
