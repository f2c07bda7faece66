"""Post-training through the one loop: vla-train algo=<recap|aloe|habc|awbc> from a base checkpoint,
exact resume with the critic's labels, and closed-loop rounds with sim rollouts."""

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import load_file

from policies.flow_matching import debug_config
from sim.collect import CollectConfig, collect
from sim.env import EnvConfig
from sim.runner import SimRunner
from training.closed_loop import collect_rollouts
from training.config import TrainConfig
from training.data import DataConfig
from training.loop import Trainer
from vla.data import load_episode, read_episode_info
from vla.errors import InputError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from toy_episodes import write_toy_episodes

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A toy dataset and a few-step SFT checkpoint on it."""
    tmp = tmp_path_factory.mktemp("post")
    root = write_toy_episodes(tmp / "toy")
    cfg = TrainConfig(
        policy=asdict(debug_config(chunk_size=4)),
        data=DataConfig(roots=[str(root)], random_shift=0),
        out=str(tmp / "sft"),
        steps=5,
        batch_size=8,
        threads=1,
        progress=False,
    )
    return root, Trainer(cfg).run()


def _train(args, cwd):
    res = subprocess.run(
        [str(BIN / "vla-train"), *args], capture_output=True, text=True, timeout=600, cwd=cwd
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout


SMALL = {
    "recap": ["algo.critic.steps=30", "algo.critic.bins=21", "algo.critic.n_step=3"],
    "aloe": ["algo.critic.steps=30", "algo.critic.ensemble=3", "algo.critic.samples=2"],
    "habc": ["algo.critic.steps=30"],
    "awbc": ["algo.critic.steps=30", "algo.critic.n_step=3"],
    "flow_dpo": ["algo.critic.steps=30", "algo.critic.ensemble=3", "algo.critic.samples=3"],
    "apo": ["algo.error_steps=2"],  # no critic: labels from the takeovers
}


def _preset_args(method, ckpt, root, out):
    """A tiny run of ``experiment=posttrain_<method>`` from the base checkpoint."""
    critic = [] if method == "apo" else ["algo.critic.batch_size=32"]
    return [
        f"experiment=posttrain_{method}",
        f"init_from={ckpt}",
        f"data.roots=[{root}]",
        "env=none",
        "steps=4",
        "batch_size=8",
        "threads=1",
        "progress=false",
        f"out={out}",
        *critic,
        *SMALL[method],
    ]


@pytest.mark.parametrize("method", list(SMALL))
def test_posttrain_preset_runs_from_a_base_checkpoint(base, tmp_path, method):
    root, ckpt = base
    out = tmp_path / method
    stdout = _train(_preset_args(method, ckpt, root, out), tmp_path)
    assert f"{method} labels:" in stdout  # the algorithm's labelling summary
    if method in ("apo", "flow_dpo"):  # compared with the starting policy, kept for a resume
        assert (out / "reference/model.safetensors").is_file()
    if method == "apo":
        assert "undesirable=" in stdout
        return
    labels = load_file(str(out / "critic/labels.safetensors"))
    assert ("cond" in labels) == (method == "recap") and ("weight" in labels) == (method != "recap")
    config = yaml.safe_load((out / "checkpoints/last/config.yaml").read_text())
    assert config["chunk_size"] == 4  # the base checkpoint's architecture, not the policy= group's
    assert config["inference_cond"] == (1 if method == "recap" else None)
    assert config["inference_guidance"] == (2.0 if method == "recap" else None)  # the preset's CFG scale
    summary = json.loads((out / "critic/summary.json").read_text())
    assert summary["critic_loss_end"] < summary["critic_loss_start"]


def test_aloe_indicator_mode_conditions_like_recap(base, tmp_path):
    """algo.critic.mode=indicator: ALOE's thresholded Q-advantage conditions the policy, with CFG."""
    root, ckpt = base
    out = tmp_path / "aloe_ind"
    _train(
        [*_preset_args("aloe", ckpt, root, out), "algo.critic.mode=indicator", "algo.guidance=1.5"], tmp_path
    )
    labels = load_file(str(out / "critic/labels.safetensors"))
    assert set(labels["cond"].unique().tolist()) == {0.0, 1.0}
    config = yaml.safe_load((out / "checkpoints/last/config.yaml").read_text())
    assert config["inference_cond"] == 1 and config["inference_guidance"] == 1.5


@pytest.mark.parametrize("method", ["recap", "apo"])
def test_posttrain_resume_is_exact_and_reuses_the_labels(base, tmp_path, method):
    """RECAP reuses its critic's labels; APO its frozen reference (the resumed policy is not the start)."""
    root, ckpt = base
    common = [
        f"experiment=posttrain_{method}",
        f"init_from={ckpt}",
        f"data.roots=[{root}]",
        "env=none",
        "steps=8",
        "save_every=4",
        "batch_size=8",
        "threads=1",
        "progress=false",
        *SMALL[method],
    ]
    _train([*common, f"out={tmp_path / 'straight'}"], tmp_path)
    _train([*common, f"out={tmp_path / 'split'}", "stop_after=4"], tmp_path)
    kept = "critic/labels.safetensors" if method == "recap" else "reference/model.safetensors"
    kept = tmp_path / "split" / kept
    written = kept.stat().st_mtime_ns
    second = _train([*common, f"out={tmp_path / 'split'}"], tmp_path)
    assert "at step 4" in second
    assert kept.stat().st_mtime_ns == written  # not refitted / rewritten
    a = load_file(str(tmp_path / "straight/checkpoints/last/model.safetensors"))
    b = load_file(str(tmp_path / "split/checkpoints/last/model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def sim_base(tmp_path_factory):
    """Three reach demos and a few-step SFT checkpoint on them (32 x 32 images)."""
    tmp = tmp_path_factory.mktemp("sim_base")
    demos = tmp / "demos"
    collect(
        CollectConfig(
            task="reach", episodes=3, out=str(demos), progress=False, env=EnvConfig(image_size=(32, 32))
        )
    )
    cfg = TrainConfig(
        policy=asdict(debug_config()),
        data=DataConfig(roots=[str(demos)], random_shift=0),
        out=str(tmp / "sft"),
        steps=3,
        batch_size=8,
        threads=1,
        progress=False,
    )
    return demos, Trainer(cfg).run()


def test_closed_loop_round_collects_rollouts_trains_and_evaluates(sim_base, tmp_path):
    demos, ckpt = sim_base
    out = tmp_path / "loop"
    stdout = _train(
        [
            "experiment=posttrain_recap",
            f"init_from={ckpt}",
            f"data.roots=[{demos}]",
            "loop.rounds=1",
            "loop.rollout_episodes=2",
            "loop.final_rollouts=false",  # (the last checkpoint's takeovers: tests/training/test_rounds.py)
            "+loop.teleop={stall_steps: 5, length: 60}",
            "env.episodes=2",
            "env.workers=1",
            "deploy.horizon=4",
            "steps=3",
            "batch_size=8",
            "threads=1",
            "progress=false",
            f"out={out}",
            *SMALL["recap"],
        ],
        tmp_path,
    )
    rounds = json.loads((out / "rounds.json").read_text())
    assert [r["round"] for r in rounds] == [0, 1]
    assert (out / "rounds.png").stat().st_size > 1000
    assert (out / "round_1/rollouts/meta/vla_episodes.jsonl").exists()
    assert "| base |" in stdout


def test_interrupted_rollouts_are_completed_with_the_seeds_they_would_have_had(sim_base, tmp_path):
    """A round's collection killed after 2 of 4 episodes keeps them; the next run collects only episodes 2
    and 3, with their own seeds, and the set equals an uninterrupted one."""
    _, ckpt = sim_base
    runner = SimRunner(task="reach", episodes=1, workers=1, horizon=4, out=str(tmp_path / "eval"))
    teleop = {"stall_steps": 5, "length": 60}
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    collect_rollouts(runner, ckpt, whole, episodes=4, seed=500, teleop=teleop)
    collect_rollouts(runner, ckpt, resumed, episodes=2, seed=500, teleop=teleop)  # the interrupted run
    collect_rollouts(runner, ckpt, resumed, episodes=4, seed=500, teleop=teleop)  # its rerun
    a, b = read_episode_info(whole), read_episode_info(resumed)
    assert [e.extra["seed"] for e in b] == [500, 501, 502, 503]
    assert [(e.extra["seed"], e.length, e.success) for e in a] == [
        (e.extra["seed"], e.length, e.success) for e in b
    ]
    np.testing.assert_array_equal(load_episode(whole, 3)["action"], load_episode(resumed, 3)["action"])
    collect_rollouts(runner, ckpt, resumed, episodes=4, seed=500, teleop=teleop)  # complete: nothing runs
    assert len(read_episode_info(resumed)) == 4
    with pytest.raises(InputError, match=r"holds 4 rollouts, more than loop.rollout_episodes=3"):
        collect_rollouts(runner, ckpt, resumed, episodes=3, seed=500, teleop=teleop)


HOLD_LOCK = """
import time
from vla.lock import folder_lock
with folder_lock({out!r}, "another training run"):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_second_run_into_a_busy_folder_is_refused_by_name(base, tmp_path):
    """vla-train into a folder another live process is training in exits 2 with one line naming the folder
    and that process, and writes nothing there."""
    root, ckpt = base
    out = tmp_path / "busy"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK.format(out=str(out))], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        res = subprocess.run(
            [str(BIN / "vla-train"), *_preset_args("awbc", ckpt, root, out)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
        )
    finally:
        holder.kill()
        holder.wait()
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    assert f"error: {out} is in use by pid {holder.pid} (another training run)" in res.stderr
    assert not out.exists()


def test_vla_replay_through_the_critic_plots_credit(base, tmp_path):
    root, ckpt = base
    out = tmp_path / "recap"
    _train(
        [
            "experiment=posttrain_recap",
            f"init_from={ckpt}",
            f"data.roots=[{root}]",
            "env=none",
            "steps=2",
            "batch_size=8",
            "threads=1",
            "progress=false",
            f"out={out}",
            *SMALL["recap"],
        ],
        tmp_path,
    )
    res = subprocess.run(
        [
            str(BIN / "vla-replay"),
            f"dataset={root}",
            f"critic={out / 'critic'}",
            f"plot={tmp_path / 'credit.png'}",
            "plot_episodes=4",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "credit plot:" in res.stdout and (tmp_path / "credit.png").stat().st_size > 10_000
    assert "mean value: success" in res.stdout


def test_indicator_embedding_gets_its_own_learning_rate():
    """optim.indicator_lr_scale: the zero-initialised RECAP indicator learns at a multiple of the lr."""
    from policies.flow_matching import FlowMatchingPolicy
    from training.algorithms.base import GradientAlgorithm, OptimConfig

    policy = FlowMatchingPolicy(debug_config())
    algo = GradientAlgorithm(policy, OptimConfig(lr=1e-3, indicator_lr_scale=10.0), total_steps=10)
    groups = {id(p): g["initial_lr"] for g in algo.optimizer.param_groups for p in g["params"]}
    assert groups[id(policy.model.cond_emb.weight)] == pytest.approx(1e-2)
    assert groups[id(next(policy.model.action_in.parameters()))] == pytest.approx(1e-3)
    assert sum(len(g["params"]) for g in algo.optimizer.param_groups) == len(list(policy.parameters()))
    with pytest.raises(ValueError, match="indicator_lr_scale"):
        OptimConfig(indicator_lr_scale=0.0)
