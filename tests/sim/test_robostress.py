"""Each RoboStress scenario changes the executed motion in its documented direction."""

import numpy as np
import pytest

import sim  # noqa: F401
from sim.env import EnvConfig, TabletopEnv
from sim.robostress import SCENARIOS, StressConfig, apply_stress


def track(scenario, severity=0.8, moves=8):
    """Move every arm joint by +0.25 rad over `moves` steps, then hold 10 steps. Returns the lag
    (command - executed) at the end of the motion and after settling, and the final gripper height."""
    env = TabletopEnv(EnvConfig(task="reach", render=False))
    apply_stress(env, StressConfig(scenario, severity, seed=0))
    obs, _ = env.reset(seed=0)
    start = obs["state"].astype(np.float64)
    lag_moving = None
    for t in range(moves + 10):
        c = start.copy()
        c[:7] += 0.25 * min(t + 1, moves) / moves
        obs, *_ = env.step(c)
        if t == moves - 1:
            lag_moving = c[:7] - obs["state"][:7]
    lag_settled = c[:7] - obs["state"][:7]
    z = env.grip_pos()[2]
    env.close()
    return lag_moving, lag_settled, z


@pytest.fixture(scope="module")
def nominal():
    return track(None)


def test_backlash_lags_the_command_against_the_motion(nominal):
    _moving, settled, _ = track("backlash")
    assert (settled > 0.005).mean() >= 5 / 7  # the joints stay behind their commands by up to b / 2
    assert settled.mean() > np.abs(nominal[1]).mean() + 0.005


def test_friction_stops_short_of_the_command(nominal):
    moving, settled, _ = track("friction")
    assert moving.mean() > nominal[0].mean()  # viscous: more lag while moving
    assert np.abs(settled).mean() > np.abs(nominal[1]).mean()  # Coulomb: short of the command at rest


def test_compliance_lags_more_while_moving(nominal):
    moving, _, _ = track("compliance")
    assert moving.mean() > nominal[0].mean()
    # even at full severity the softened arm still follows its command (it lags, it is not limp)
    _, settled, _ = track("compliance", severity=1.0, moves=4)
    assert np.abs(settled).max() < 0.1, settled


def test_gravity_compensation_error_sags_the_arm(nominal):
    _, settled, z = track("gravity")
    assert z < nominal[2] - 0.002  # the gripper ends lower than the nominal arm's
    assert np.abs(settled).max() > np.abs(nominal[1]).max()


def test_combined_scenarios_and_config_errors():
    assert set(SCENARIOS) == {"friction", "backlash", "compliance", "gravity", "wear", "payload", "all"}
    _moving, settled, _ = track("all")
    assert np.isfinite(settled).all()
    with pytest.raises(ValueError, match="scenarios"):
        StressConfig("rust")
    with pytest.raises(ValueError, match="severity"):
        StressConfig("all", severity=2.0)
