"""Every arm profile's safety layer passes normal motion and still faults on motion beyond its limits.

The sim experts cover the 7-joint arms (tests/sim/test_deploy_safety.py); here every registered profile,
the UR5e and SO-101 included, gets the same treatment from a profile-generic demonstrator: minimum-jerk
joint moves between random poses inside the joint range and the workspace box, at up to 80 % of each
joint's velocity and acceleration limits, sent at the profile's control rate, and a gripper that opens
and closes in one period."""

import numpy as np
import pytest

from hardware.profiles import PROFILES
from vla.robot import Observation, RobotProfile
from vla.runtime.safety import SafetyConfig, SafetyLayer


def reachable_pose(profile: RobotProfile, rng: np.random.Generator) -> np.ndarray:
    lo, hi = np.asarray(profile.limits.lower), np.asarray(profile.limits.upper)
    home = np.asarray(profile.home)
    for _ in range(1000):
        q = np.clip(home + rng.uniform(-0.6, 0.6, len(home)), lo + 0.05, hi - 0.05)
        if profile.workspace.violation(profile.kinematics.tool_position(q)) is None:
            return q
    raise AssertionError(f"{profile.name}: no pose inside the workspace near home")


def min_jerk_move(q0, q1, profile: RobotProfile, speed: float, accel: bool) -> np.ndarray:
    """Setpoints [T, J] of a minimum-jerk move whose peak velocity (and, with ``accel``, acceleration) is
    ``speed`` x the limits (peak v = 1.875 d / T, peak a = 5.77 d / T^2 for distance d)."""
    d = np.abs(q1 - q0)
    vmax, amax = np.asarray(profile.limits.max_velocity), np.asarray(profile.limits.max_acceleration)
    t_acc = np.max(np.sqrt(5.77 * d / (speed * amax))) if accel else 0.0
    duration = max(np.max(1.875 * d / (speed * vmax)), t_acc, profile.dt)
    s = np.linspace(0, 1, int(np.ceil(duration / profile.dt)) + 1)[1:, None]
    return q0 + (q1 - q0) * (10 * s**3 - 15 * s**4 + 6 * s**5)


def run(profile: RobotProfile, speed: float, moves: int = 12, seed: int = 0, accel: bool = True):
    rng = np.random.default_rng(seed)
    safety = SafetyLayer(profile, SafetyConfig(mode="hold"))
    q = np.asarray(profile.home)
    g = profile.gripper
    t = 0.0
    safety.reset(Observation(q, t, gripper=None if g is None else g.open))
    first = True
    for k in range(moves):
        target = reachable_pose(profile, rng)
        for setpoint in min_jerk_move(q, target, profile, speed, accel):
            grip = [] if g is None else [g.closed if k % 2 else g.open]  # open/close in one period
            out = safety.step(lambda s=setpoint, gr=grip, f=first: (np.r_[s, gr], f), Observation(q, t), t)
            first = False
            if safety.holding:
                return safety
            q, t = out[: profile.arm_dim], t + profile.dt
        q = target
    return safety


@pytest.mark.parametrize("name", PROFILES.names())
def test_normal_motion_passes_every_profile(name):
    safety = run(PROFILES.get(name), speed=0.8)
    assert safety.fault is None
    assert safety.interpolated == 0  # within the limits: nothing shaped either


@pytest.mark.parametrize("name", PROFILES.names())
def test_motion_beyond_the_velocity_limit_holds_on_every_profile(name):
    safety = run(PROFILES.get(name), speed=2.5, accel=False)  # peak velocity 2.5 x the limit
    assert safety.fault is not None and "velocity" in safety.fault.reason
