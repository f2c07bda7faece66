"""Rollouts with a simulated operator: takeovers trigger, are recorded as interventions, and help."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sim  # noqa: F401
from sim.env import EnvConfig, TabletopEnv
from sim.experts import ScriptedExpert
from sim.robots.panda import PANDA
from sim.rollout import RolloutConfig, rollout
from sim.tasks.base import OPEN
from sim.teleop import SimulatedTeleop, TeleopConfig
from vla.data.reader import load_episode, read_episode_info
from vla.data.schema import ACTION, IS_INTERVENTION, POLICY_ACTION
from vla.runtime.config import DeployConfig
from vla.runtime.safety import SafetyConfig

RUNTIME_TESTS = Path(__file__).resolve().parents[1] / "runtime"
sys.path.insert(0, str(RUNTIME_TESTS))
from dummy_policy import HomePolicy  # noqa: E402

HOME = [*PANDA.home, OPEN]


@pytest.fixture(scope="module")
def home_ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "home"
    HomePolicy(HOME, chunk_size=10, noise_std=0.0).save(path)
    return path


def _cfg(ckpt, out, safety="off", **kw) -> RolloutConfig:
    kw = {"task": "reach", "episodes": 3, "workers": 0, **kw}
    kw["deploy"] = DeployConfig(horizon=5, safety=SafetyConfig(mode=safety))
    return RolloutConfig(
        checkpoint=str(ckpt),
        out=str(out),
        imports=["dummy_policy"],
        env=EnvConfig(image_size=(32, 32)),
        progress=False,
        **kw,
    )


def test_operator_takes_over_a_stalled_policy_and_is_recorded_as_intervention(home_ckpt, tmp_path):
    teleop = TeleopConfig(stall_steps=5, delay=2, length=60)
    s = rollout(_cfg(home_ckpt, tmp_path / "ds", teleop=teleop))
    assert s.episodes == 3 and s.takeovers >= 3
    assert s.successes == 3  # the policy never moves; only the operator can reach the ball
    infos = read_episode_info(tmp_path / "ds")
    assert [i.source for i in infos] == ["policy"] * 3
    ep = load_episode(tmp_path / "ds", 0)
    human = ep[IS_INTERVENTION].reshape(-1).astype(bool)
    first = int(np.argmax(human))
    # the policy stood still for stall_steps + delay steps before the operator acted
    assert not human[:first].any() and first == teleop.stall_steps + teleop.delay
    assert human[first:].all()  # it reached the ball within its takeover and the episode ended
    np.testing.assert_allclose(ep[POLICY_ACTION][human], np.tile(HOME, (human.sum(), 1)), atol=1e-6)
    assert np.abs(ep[ACTION][human] - ep[POLICY_ACTION][human]).max() > 0.05  # what ran is the human's
    np.testing.assert_allclose(ep[ACTION][~human], ep[POLICY_ACTION][~human])


def test_without_operator_nothing_is_taken_over(home_ckpt, tmp_path):
    s = rollout(_cfg(home_ckpt, tmp_path / "ds", episodes=2, teleop=TeleopConfig(enabled=False)))
    assert (s.takeovers, s.intervention_frames, s.successes) == (0, 0, 0)
    with pytest.raises(FileExistsError, match="resume=true"):
        rollout(_cfg(home_ckpt, tmp_path / "ds", episodes=1))


def test_leaving_the_tube_triggers_after_the_reaction_delay():
    env = TabletopEnv(EnvConfig(task="reach", render=False))
    env.reset(seed=3)
    teleop = SimulatedTeleop(env, TeleopConfig(tube=0.05, stall_steps=100, delay=2, length=3))
    teleop.reset_episode(3, env.get_state())
    far = np.r_[PANDA.home, OPEN].astype(np.float32)
    far[0] += 1.2  # swing the base joint: the gripper leaves the expert's path
    acted = []
    for _ in range(20):
        engaged = teleop.engaged()
        acted.append(engaged)
        env.step(teleop.action() if engaged else far)
    first = acted.index(True)
    assert "tube" in teleop.last_trigger
    assert acted[first : first + 3] == [True] * 3 and not acted[first + 3]  # hands back after `length`
    env.close()


def test_takeover_of_a_held_cube_starts_at_carry():
    env = TabletopEnv(EnvConfig(task="pick_place", render=False))
    env.reset(seed=0)
    expert = ScriptedExpert(env, seed=0)
    expert.reset()
    while expert.phases[expert.k].name != "carry":
        env.step(expert.act())
    takeover = ScriptedExpert(env, seed=1)
    takeover.reset(takeover=True)
    assert takeover.phases[takeover.k].name == "carry"
    success = False
    for _ in range(80):
        success = env.step(takeover.act())[4]["success"] or success
    assert success
    env.close()


def test_vla_rollout_cli(home_ckpt, tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(RUNTIME_TESTS), os.environ.get("PYTHONPATH")])),
    }
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "vla-rollout"),
            f"checkpoint={home_ckpt}",
            "task=reach",
            "episodes=2",
            f"out={tmp_path / 'ds'}",
            "workers=1",
            "imports=[dummy_policy]",
            "env.image_size=[32,32]",
            "teleop.stall_steps=5",
            "teleop.length=60",
            "progress=false",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "success: 2/2"
    assert len(read_episode_info(tmp_path / "ds")) == 2


def test_the_rollout_runs_the_whole_deployment_stack(home_ckpt, tmp_path):
    """Rollouts share the evaluation's loop: the safety layer runs on the operator's commands too, and the
    expert operator's takeovers pass it (no hold) and still reach the ball."""
    teleop = TeleopConfig(stall_steps=5, delay=2, length=60)
    s = rollout(_cfg(home_ckpt, tmp_path / "ds", episodes=2, teleop=teleop, safety="hold"))
    assert s.holds == 0 and s.successes == 2 and s.takeovers >= 2
    assert [i.extra["fault"] for i in read_episode_info(tmp_path / "ds")] == [None, None]


def test_a_person_operates_in_this_process(home_ckpt, tmp_path):
    """teleop.device=<LeRobot device>: the loop runs in real time in this process (workers=0)."""
    with pytest.raises(ValueError, match="set workers=0"):
        _cfg(home_ckpt, tmp_path / "a", workers=2, teleop=TeleopConfig(device="gamepad"))
    with pytest.raises(ValueError, match=r"teleop\.device='joystick'"):
        TeleopConfig(device="joystick")
