"""Fixtures of the ROS tests: a trained reach policy, ROS set-up, and the nodes in their own processes.

The policy: our flow-matching VLA (the tiny ``flow_matching_debug`` preset, 32x32 images) trained by
``vla-train`` on 12 scripted reach demos with DART noise, all in one scene (seed ``SCENE``). It learns that
scene reliably in ~40 s on one CPU thread, so the test checks the ROS deployment path with a policy that
acts and succeeds, not the policy's generalisation (``benchmarks/sft.py`` measures that).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from ros_helpers import Deployment, init

SCENE = 3  # the reach scene the test policy is trained and deployed in
DEMOS = 12


def collect_one_scene(out: Path, seed: int = SCENE, demos: int = DEMOS) -> Path:
    import sim  # noqa: F401  (GL backend)
    from sim.collect import episode_spec, make_frame
    from sim.env import EnvConfig, TabletopEnv
    from sim.experts.scripted import ExpertNoise, ScriptedExpert
    from vla.data.writer import EpisodeWriter

    cfg = EnvConfig(task="reach", image_size=(32, 32), terminate_on_success=False)
    env = TabletopEnv(cfg)
    expert = ScriptedExpert(env, ExpertNoise(execute_std=0.03), seed=0)
    with EpisodeWriter(out, episode_spec(env), durable=False) as writer:
        for k in range(demos):
            obs, _ = env.reset(seed=seed)
            expert.rng = np.random.default_rng([seed, k])
            expert.reset()
            success = False
            while True:
                action = expert.act()
                nobs, reward, terminated, truncated, info = env.step(expert.executed(action))
                success = success or bool(info["success"])
                end = terminated or truncated or (expert.done and success)
                writer.add_frame(make_frame(obs, action, reward, end, cfg.cameras))
                obs = nobs
                if end:
                    break
            writer.end_episode(success=success, source="scripted", extra={"seed": seed})
    env.close()
    return out


@pytest.fixture(scope="session")
def reach_checkpoint(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("policy")
    data = collect_one_scene(root / "demos")
    train = Path(sys.executable).parent / "vla-train"
    cmd = [
        str(train),
        "experiment=debug",
        f"data.roots=[{data}]",
        "steps=600",
        "save_every=600",
        "log_every=600",
        f"out={root / 'train'}",
        "optim.lr=1e-3",
        "optim.warmup_steps=50",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    ckpt = root / "train" / "checkpoints" / "last"
    assert (ckpt / "model.safetensors").is_file()
    return ckpt


@pytest.fixture(scope="session", autouse=True)
def ros() -> None:
    """rclpy for the test's own client; the nodes run in their own processes."""
    assert os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == "LOCALHOST", (
        "run the ROS tests through scripts/ros_test.sh (loopback only, a private ROS_DOMAIN_ID)"
    )
    init()
    yield
    import rclpy

    if rclpy.ok():
        rclpy.shutdown()


@pytest.fixture
def deployment(tmp_path, reach_checkpoint):
    deployments: list[Deployment] = []

    def make(**deploy: object) -> Deployment:
        checkpoint = deploy.pop("checkpoint", reach_checkpoint)
        d = Deployment.start(tmp_path, checkpoint, SCENE, **deploy)  # type: ignore[arg-type]
        deployments.append(d)
        return d

    yield make
    for d in deployments:
        d.close()
