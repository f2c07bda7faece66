"""collect -> replay round trip through LeRobotDataset v3, the CLIs, and a collection killed mid-run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import sim  # noqa: F401
from sim.collect import CollectConfig, collect
from sim.env import EnvConfig
from sim.replay import ReplayConfig, replay
from vla.data.reader import load_episode, open_dataset, read_episode_info
from vla.data.validate import validate_dataset

BIN = Path(sys.executable).parent


def test_collect_then_replay_round_trip(tmp_path):
    out = tmp_path / "pp"
    cfg = CollectConfig(
        task="pick_place",
        episodes=2,
        out=str(out),
        seed=3,
        progress=False,
        env=EnvConfig(image_size=(32, 32)),
    )
    k, n, root = collect(cfg)
    assert (k, n) == (2, 2)
    ds = open_dataset(root)
    assert ds.num_episodes == 2
    validate_dataset(root)
    infos = read_episode_info(root)
    assert [i.success for i in infos] == [True, True] and {i.source for i in infos} == {"scripted"}
    assert [i.extra["seed"] for i in infos] == [3, 4]
    ep = load_episode(root, 0)
    assert ep["observation.images.agentview"].shape[1:] == (32, 32, 3)
    np.testing.assert_array_equal(ep["action"], ep["complementary_info.policy_action"])
    assert not ep["complementary_info.is_intervention"].any() and ep["next.done"][-1]
    sheet = tmp_path / "sheet.png"
    ok, total = replay(ReplayConfig(dataset=str(root), sheet=str(sheet), progress=False))
    assert (ok, total) == (2, 2)
    assert sheet.stat().st_size > 1000


def test_replay_detects_corrupted_actions(tmp_path):
    """Replay is a real check: shifted actions no longer solve the task."""
    cfg = CollectConfig(
        task="reach", episodes=1, out=str(tmp_path / "r"), progress=False, env=EnvConfig(image_size=(16, 16))
    )
    _, _, root = collect(cfg)
    info = read_episode_info(root)[0]
    actions = load_episode(root, 0, keys=["action"])["action"]
    from sim.env import TabletopEnv
    from sim.replay import replay_episode

    env = TabletopEnv(EnvConfig(task="reach", render=False, terminate_on_success=False))
    assert replay_episode(env, actions, info.extra)
    bad = actions.copy()
    bad[:, 0] += 0.6  # swing the base joint away
    assert not replay_episode(env, bad, info.extra)


def test_cli_collect_killed_mid_run_keeps_episodes_and_resumes(tmp_path):
    out = tmp_path / "ds"
    args = [
        str(BIN / "vla-collect"),
        "task=pick_place",
        "episodes=6",
        f"out={out}",
        "seed=0",
        "env.image_size=[24,24]",
        "progress=false",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    sidecar = out / "meta" / "vla_episodes.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:
        if sidecar.exists() and len(sidecar.read_text().splitlines()) >= 2:
            break
        assert proc.poll() is None, proc.stdout.read().decode()
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = len(sidecar.read_text().splitlines())
    assert 2 <= kept < 6
    res = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"resuming {out}: {kept} episodes" in res.stdout
    assert "expert success:" in res.stdout
    infos = read_episode_info(out)
    assert [i.episode_index for i in infos] == list(range(6))
    assert [i.extra["seed"] for i in infos] == list(range(6))  # no seed repeated or skipped
    assert open_dataset(out).num_episodes == 6
    validate_dataset(out)
    rep = subprocess.run(
        [str(BIN / "vla-replay"), f"dataset={out}", "progress=false"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "replay success: 6/6" in rep.stdout, rep.stdout + rep.stderr


def test_cli_refuses_unknown_task(tmp_path):
    res = subprocess.run(
        [str(BIN / "vla-collect"), "task=nope", f"out={tmp_path / 'x'}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode != 0
    assert "unknown task 'nope'" in res.stdout + res.stderr


@pytest.mark.parametrize("task", ["push"])
def test_sidecar_extra_is_json(tmp_path, task):
    _, _, root = collect(
        CollectConfig(
            task=task,
            episodes=1,
            out=str(tmp_path / task),
            progress=False,
            env=EnvConfig(image_size=(16, 16)),
        )
    )
    line = json.loads((root / "meta" / "vla_episodes.jsonl").read_text().splitlines()[0])
    assert line["extra"]["task_name"] == task


def test_a_resumed_collection_without_failures_tries_new_seeds(tmp_path):
    """``keep_failures=false`` drops failed attempts; a resumed collection goes on after the last seed tried,
    so no scene is collected twice (counting the committed episodes would repeat seeds)."""
    from sim.experts import ExpertNoise
    from vla.data.sidecar import read_sidecar

    def run(episodes: int) -> None:
        collect(
            CollectConfig(
                task="reach",
                episodes=episodes,
                out=str(tmp_path / "d"),
                keep_failures=False,
                resume=True,
                progress=False,
                noise=ExpertNoise(aim_std=0.05),  # a sloppy operator: some reach attempts miss
                env=EnvConfig(image_size=(16, 16)),
            )
        )

    run(3)
    first = [m.extra["seed"] for m in read_sidecar(tmp_path / "d")]
    assert len(first) == 3 and first[-1] > 2, first  # failures were dropped: seeds beyond 0..2 were needed
    run(5)
    seeds = [m.extra["seed"] for m in read_sidecar(tmp_path / "d")]
    assert seeds[:3] == first and len(seeds) == 5
    assert len(set(seeds)) == 5 and seeds == sorted(seeds), seeds
