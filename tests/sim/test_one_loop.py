"""One control loop in the project: sim evaluation and sim rollouts both run ``vla.runtime.loop.run_episode``
(counted), and no other module drives a policy's executor or a robot."""

import re
import sys
from pathlib import Path

import pytest

import sim.deploy
from sim.env import EnvConfig
from sim.evaluation import EvalConfig, evaluate
from sim.robots.panda import PANDA
from sim.rollout import RolloutConfig, rollout
from sim.tasks.base import OPEN
from sim.teleop import TeleopConfig
from vla.runtime import loop

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_TESTS = ROOT / "tests" / "runtime"
sys.path.insert(0, str(RUNTIME_TESTS))
from dummy_policy import HomePolicy  # noqa: E402

PACKAGES = ("vla", "policies", "training", "sim", "hardware", "benchmarks", "scripts")


def test_evaluation_and_rollouts_run_the_one_episode_loop(tmp_path, monkeypatch):
    ckpt = tmp_path / "home"
    HomePolicy([*PANDA.home, OPEN], chunk_size=10).save(ckpt)
    calls = []

    def counted(*args, **kwargs):
        calls.append(kwargs.get("teleop"))
        return loop.run_episode(*args, **kwargs)

    monkeypatch.setattr(sim.deploy, "run_episode", counted)
    common = dict(checkpoint=str(ckpt), task="reach", workers=0, imports=["dummy_policy"], progress=False)
    common["env"] = EnvConfig(image_size=(32, 32), max_steps=15)
    evaluate(EvalConfig(episodes=2, videos=0, out=str(tmp_path / "eval"), **common))
    assert calls == [None, None]
    rollout(RolloutConfig(episodes=2, out=str(tmp_path / "ds"), teleop=TeleopConfig(stall_steps=3), **common))
    assert len(calls) == 4 and all(t is not None for t in calls[2:])  # with the simulated operator


def _sources():
    for pkg in PACKAGES:
        yield from sorted((ROOT / pkg).rglob("*.py"))


@pytest.mark.parametrize(
    ("pattern", "allowed"),
    [
        (r"executor\.act\(", {"vla/runtime/stack.py"}),  # the policy's actions are taken in one place
        (r"stack\.step\(", {"vla/runtime/loop.py"}),  # the stack is stepped by the loop only
        (r"robot\.(command|hold)\(", {"vla/runtime/loop.py"}),  # and the robot commanded by it
    ],
)
def test_no_other_module_runs_a_control_loop(pattern, allowed):
    found = {
        str(path.relative_to(ROOT))
        for path in _sources()
        if re.search(pattern, path.read_text()) and "ros2_ws" not in str(path)
    }
    assert found <= allowed, f"{pattern} outside the runtime: {sorted(found - allowed)}"
