"""Inference in a separate process: same chunks as in-process, and a dead worker becomes a hold."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from dummy_policy import HomePolicy  # noqa: E402
from toy_robot import ToyRobot  # noqa: E402

from vla.runtime import PolicyRunner  # noqa: E402
from vla.runtime.config import AsyncConfig, DeployConfig  # noqa: E402
from vla.runtime.inference_process import InferenceProcess  # noqa: E402
from vla.runtime.loop import run_episode  # noqa: E402
from vla.runtime.safety import SafetyConfig  # noqa: E402
from vla.runtime.stack import build_stack  # noqa: E402

OBS = {"state": np.zeros(3, dtype=np.float32), "instruction": "go"}


@pytest.fixture
def ckpt(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    path = tmp_path / "home"
    HomePolicy([0.3, -0.2, 1.0], chunk_size=4, noise_std=0.05).save(path)
    return path


def test_the_worker_samples_what_the_policy_samples_in_process(ckpt):
    server = InferenceProcess(str(ckpt), imports=["dummy_policy"], seed=7)
    try:
        local = PolicyRunner(HomePolicy.load(ckpt), cameras=[], seed=7)
        for _ in range(3):
            np.testing.assert_allclose(server(OBS), local(OBS), rtol=0, atol=1e-6)
        assert (server.chunk_size, server.action_dim) == (4, 3)
        assert len(server.latencies) == 3 and min(server.round_trips) >= min(server.latencies)
    finally:
        server.close()


def test_a_dead_worker_makes_the_robot_hold(ckpt):
    server = InferenceProcess(str(ckpt), imports=["dummy_policy"])
    deploy = DeployConfig(
        horizon=2,
        async_inference=AsyncConfig(enabled=True),
        safety=SafetyConfig(mode="hold", stale_after_s=10.0),
    )
    robot = ToyRobot(max_steps=30, goal=(9.0, 9.0))
    stack = build_stack(deploy, server, profile=robot.profile, chunk_size=4)
    server.process.kill()
    server.process.join()
    try:
        r = run_episode(robot, stack)
    finally:
        stack.close()
        server.close()
    assert r.fault is not None and "inference process died" in r.fault
    assert robot.holds == 30


def test_a_checkpoint_the_worker_cannot_load_is_reported(tmp_path, monkeypatch):
    with pytest.raises(RuntimeError, match="could not load"):
        InferenceProcess(str(tmp_path / "missing"), imports=["dummy_policy"], timeout_s=60)
