"""``runner=ray``: the same episodes as the process pool for the same seeds, and an actor that dies
mid-episode is replaced, its episode rerun once, and the dataset stays valid."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the ray extra is not installed (make setup EXTRAS=dev,ros,ray)")

from sim.env import EnvConfig
from sim.robots.panda import PANDA
from sim.rollout import RolloutConfig, rollout
from sim.tasks.base import OPEN
from vla.data.reader import read_episode_info
from vla.data.validate import validate_dataset
from vla.runtime.config import DeployConfig

HERE = Path(__file__).resolve().parent
RUNTIME_TESTS = HERE.parent / "runtime"
sys.path[:0] = [str(HERE), str(RUNTIME_TESTS)]
from dummy_policy import HomePolicy  # noqa: E402
from dying_worker import DiesOnce  # noqa: E402

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "home"
    HomePolicy([*PANDA.home, OPEN], chunk_size=10, noise_std=0.02).save(path)  # noise: the seeds matter
    return path


def _eval(ckpt, tmp_path, name, *args):
    out = tmp_path / name
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(RUNTIME_TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    res = subprocess.run(
        [
            str(BIN / "vla-eval"),
            f"checkpoint={ckpt}",
            "task=reach",
            "episodes=3",
            "videos=0",
            "imports=[dummy_policy]",
            f"out={out}",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    records = json.loads((out / "eval.json").read_text())["episodes"]
    return [(r["seed"], r["success"], r["length"], round(r["jerk"], 6)) for r in records]


def test_ray_plays_the_process_pools_episodes(ckpt, tmp_path):
    pool = _eval(ckpt, tmp_path, "pool", "workers=2")
    on_ray = _eval(ckpt, tmp_path, "ray", "workers=2", "runner=ray")
    assert on_ray == pool and [s for s, *_ in pool] == [0, 1, 2]
    assert len({jerk for *_, jerk in pool}) == 3  # three different episodes, each the same on both


def test_a_dead_ray_worker_is_replaced_and_its_episode_rerun_once(ckpt, tmp_path):
    cfg = RolloutConfig(
        checkpoint=str(ckpt),
        out=str(tmp_path / "ds"),
        imports=["dummy_policy"],
        task="reach",
        episodes=3,
        workers=1,  # one actor: it dies in episode 1, a new one reruns it and plays episode 2
        runner="ray",
        env=EnvConfig(image_size=(32, 32)),
        deploy=DeployConfig(horizon=5),
        progress=False,
    )
    with pytest.warns(UserWarning, match="episode 1: its Ray worker died; rerunning it"):
        summary = rollout(cfg, worker=DiesOnce)
    assert (tmp_path / "worker_died").exists()  # it did die
    assert summary.episodes == 3
    report = validate_dataset(tmp_path / "ds")
    assert report.num_episodes == 3
    seeds = [e.extra["seed"] for e in read_episode_info(tmp_path / "ds")]
    assert seeds == [0, 1, 2]  # each seed once, in order: none lost, none twice
