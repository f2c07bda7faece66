"""The deployment stack on the MuJoCo arm: every task's scripted expert passes the safety layer with the
real limits of every 7-joint profile, and each genuine fault holds the arm within one control period."""

import numpy as np
import pytest

import sim  # noqa: F401
from hardware.profiles import PROFILES
from sim.env import EnvConfig, TabletopEnv
from sim.experts import ScriptedExpert
from sim.robot import SimRobot
from vla.runtime.config import DeployConfig
from vla.runtime.loop import run_episode
from vla.runtime.safety import SafetyConfig
from vla.runtime.stack import build_stack

TASKS = ("reach", "pick_place", "push", "stack", "drawer")
H = 10


class ExpertOperator:
    """The task's scripted expert as a teleoperator that is always engaged."""

    def __init__(self, env):
        self.expert = ScriptedExpert(env)

    def reset(self, robot):
        self.expert.rng = np.random.default_rng(robot.seed)
        self.expert.reset()

    def engaged(self, obs):
        return True

    def action(self, obs):
        return self.expert.act()


class Steps:
    """Subscriber: per period, whether the robot was held."""

    def on_start(self, robot, obs):
        self.holding, self.joints = [], []

    def on_step(self, step):
        self.holding.append(step.out.holding)
        self.joints.append(step.obs.joints)

    def on_end(self, result):
        pass


def idle(obs):
    return np.zeros((H, 8))  # never executed: the operator drives


def deploy(mode="hold", horizon=5):
    return DeployConfig(horizon=horizon, safety=SafetyConfig(mode=mode))


@pytest.mark.parametrize("profile", ["panda", "fr3"])
@pytest.mark.parametrize("task", TASKS)
def test_every_task_expert_passes_the_safety_layer(task, profile):
    """Zero faults, and the same outcome as without the layer (seeds 0-1; `-m slow` runs 10)."""
    _expert_through_safety(task, profile, seeds=range(2))


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["panda", "fr3"])
@pytest.mark.parametrize("task", TASKS)
def test_every_task_expert_passes_the_safety_layer_many_seeds(task, profile):
    _expert_through_safety(task, profile, seeds=range(10))


def _expert_through_safety(task, profile, seeds):
    env = TabletopEnv(EnvConfig(task=task, render=False))
    robot = SimRobot(env, PROFILES.get(profile))
    operator = ExpertOperator(env)
    outcome = {}
    for mode in ("off", "hold"):
        stack = build_stack(deploy(mode), idle, profile=robot.profile, chunk_size=H)
        outcome[mode] = [run_episode(robot, stack, seed=s, teleop=operator) for s in seeds]
    env.close()
    assert [r.fault for r in outcome["hold"]] == [None] * len(seeds)
    assert [r.success for r in outcome["hold"]] == [r.success for r in outcome["off"]] == [True] * len(seeds)


# ---- each fault kind holds within one period -------------------------------------------------------------
class StaleCamera:
    """A SimRobot whose agent-view frame stops updating after ``after`` periods (a frozen camera driver):
    the frame and its capture stamp stay those of period ``after``."""

    def __init__(self, robot, after):
        self.robot, self.after = robot, after
        self.profile, self.capabilities = robot.profile, robot.capabilities

    def __getattr__(self, name):
        return getattr(self.robot, name)

    def reset(self, seed=None):
        self.robot.reset(seed)
        self.frozen = None

    def observe(self):
        obs = self.robot.observe()
        if self.robot.env.steps >= self.after:
            if self.frozen is None:
                self.frozen = (obs.images["agentview"], obs.image_stamps["agentview"])
            obs.images["agentview"], obs.image_stamps["agentview"] = self.frozen
        return obs


def home_chunk(robot, delta=None):
    pose = np.r_[robot.profile.home, robot.profile.gripper.open]
    if delta is not None:
        pose = pose + delta
    return np.tile(pose, (H, 1))


def moving_chunk(robot, joint, per_step):
    """A chunk whose own motion moves ``joint`` ``per_step`` rad each action."""
    c = home_chunk(robot)
    c[:, joint] += per_step * np.arange(1, H + 1)
    return c


FAULTS = {
    # name: (sample_fn(robot) -> (obs -> chunk), the period the fault must hold at, the reason)
    "nan": (
        lambda r, n: lambda o: home_chunk(r, np.r_[np.nan, np.zeros(7)]) if n() >= 2 else home_chunk(r),
        10,
        "policy failed: NonFiniteChunkError",
    ),
    "inference crash": (
        lambda r, n: (
            lambda o: (_ for _ in ()).throw(RuntimeError("worker died")) if n() >= 2 else home_chunk(r)
        ),
        10,
        "policy failed: RuntimeError: worker died",
    ),
    "out of range": (
        lambda r, n: lambda o: home_chunk(r, np.r_[0, 0, 0, 3.0, 0, 0, 0, 0]) if n() >= 2 else home_chunk(r),
        10,
        "joint4 target",
    ),
    "arm velocity": (
        lambda r, n: lambda o: moving_chunk(r, 6, 0.6) if n() >= 2 else home_chunk(r),
        11,
        "joint7 velocity 6.000 rad/s beyond 2 x its limit 2.610",
    ),
    "workspace": (
        lambda r, n: (
            lambda o: home_chunk(r, np.r_[0, 1.2, 0, 0.9, 0, 0, 0, 0]) if n() >= 2 else home_chunk(r)
        ),
        10,
        "workspace: tool target z=",
    ),
}


@pytest.mark.parametrize("kind", [*FAULTS, "stale camera"])
def test_each_fault_kind_holds_within_one_period(kind):
    env = TabletopEnv(EnvConfig(task="reach", image_size=(32, 32), max_steps=30))
    robot = SimRobot(env)
    calls = []

    def counter():
        calls.append(1)
        return len(calls)

    if kind == "stale camera":
        robot, sample, at, reason = (
            StaleCamera(robot, after=12),
            (lambda o: home_chunk(robot)),
            15,
            "stale observation: agentview 300 ms old",
        )
    else:
        make, at, reason = FAULTS[kind]
        sample = make(robot, counter)
    stack = build_stack(deploy(horizon=H), sample, profile=robot.profile, chunk_size=H)
    steps = Steps()
    r = run_episode(robot, stack, seed=0, subscribers=[steps])
    assert r.fault is not None and reason in r.fault, r.fault
    assert steps.holding.index(True) == at  # held in the very period the fault appeared
    assert all(steps.holding[at:])  # and from then on
    # the arm stays where it was measured when the hold began
    np.testing.assert_allclose(robot.observe().joints, steps.joints[at], atol=0.01)
    env.close()
