"""vla-train's run folders: a new one per run unless out= is given, resume only the same run, the run's record
(.hydra/, train.log, checkpoints/<step>), the critics' scalars in TensorBoard, wandb off unless asked."""

import dataclasses
import hashlib
import importlib.util
import subprocess
import sys
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from toy_episodes import write_toy_episodes
from tqdm import tqdm

from policies.flow_matching import debug_config
from training.closed_loop import round_config
from training.config import LoopConfig, TrainConfig, WandbConfig
from training.data import DataConfig
from training.loop import Trainer, check_inputs
from training.run_folder import config_differences, default_out, run_log
from vla.errors import InputError

BIN = Path(sys.executable).parent
DEBUG = ["experiment=debug", "steps=4", "save_every=2", "batch_size=4", "threads=1", "progress=false"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    return write_toy_episodes(tmp / "a", n=4), write_toy_episodes(tmp / "b", n=4, seed=1)


def _cli(args, cwd):
    return subprocess.run(
        [str(BIN / "vla-train"), *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


def _ok(res):
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


def test_runs_get_folders_of_their_own_and_resume_only_the_same_run(toy, tmp_path):
    a, b = toy
    first = _ok(_cli([*DEBUG, f"data.roots=[{a}]", "stop_after=2"], tmp_path))
    _ok(_cli([*DEBUG, f"data.roots=[{b}]"], tmp_path))
    runs = sorted(p.relative_to(tmp_path) for p in tmp_path.glob("outputs/train/*/*_debug*") if p.is_dir())
    assert len(runs) == 2, runs  # two runs with other data: two folders
    folder = Path(first.split("run folder: ")[1].split()[0])
    assert folder in runs and folder.parent.name == f"{datetime.now():%Y-%m-%d}"
    run = tmp_path / folder
    composed = yaml.safe_load((run / ".hydra/config.yaml").read_text())
    assert composed["out"] == str(folder) and composed["data"]["roots"] == [str(a)]
    assert "stop_after=2" in yaml.safe_load((run / ".hydra/overrides.yaml").read_text())
    assert (run / ".hydra/hydra.yaml").is_file()
    assert f"run folder: {folder}" in (run / "train.log").read_text()
    assert (run / "checkpoints/000002/model.safetensors").is_file()

    # the same config into the same folder (stop_after does not count): the run goes on
    resumed = _ok(_cli([*DEBUG, f"data.roots=[{a}]", f"out={folder}"], tmp_path))
    assert f"resuming {folder}/checkpoints/last at step 2" in resumed
    assert "at step 2" in (run / "train.log").read_text()

    # another config: one line naming each differing key with both values, nothing written
    before = _tree(run)
    res = _cli([*DEBUG, f"data.roots=[{b}]", "steps=6", f"out={folder}"], tmp_path)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stdout + res.stderr
    assert lines[0].startswith(f"error: {folder}: holds a run with another config (")
    assert f"data.roots: [{a}] != [{b}]" in lines[0] and "steps: 4 != 6" in lines[0], lines[0]
    assert "resume=false" in lines[0] and _tree(run) == before

    # resume=false starts over in it
    again = _ok(_cli([*DEBUG, f"data.roots=[{b}]", "steps=6", f"out={folder}", "resume=false"], tmp_path))
    assert "resuming" not in again
    assert yaml.safe_load((run / ".hydra/config.yaml").read_text())["data"]["roots"] == [str(b)]


def test_sweep_jobs_never_share_a_folder(toy, tmp_path):
    a, _ = toy
    _ok(_cli(["-m", *DEBUG, "steps=2", f"data.roots=[{a}]", "seed=0,1"], tmp_path))
    runs = sorted(p.name[8:] for p in tmp_path.glob("outputs/train/*/*") if p.is_dir())
    assert runs == ["_debug_0", "_debug_1"], runs
    assert not (tmp_path / "multirun").exists()


def test_a_post_training_run_logs_its_critic_in_tensorboard(toy, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    a, _ = toy
    base = TrainConfig(
        policy=asdict(debug_config(chunk_size=4)),
        data=DataConfig(roots=[str(a)], random_shift=0),
        out=str(tmp_path / "base"),
        steps=2,
        batch_size=4,
        threads=1,
        progress=False,
    )
    ckpt = Trainer(base).run()
    args = [
        "experiment=posttrain_awbc",
        f"init_from={ckpt}",
        f"data.roots=[{a}]",
        "env=none",
        "steps=2",
        "log_every=1",
    ]
    small = [
        "batch_size=4",
        "threads=1",
        "progress=false",
        "algo.critic.steps=30",
        "algo.critic.batch_size=16",
    ]
    _ok(_cli([*args, *small, "algo.critic.n_step=3"], tmp_path))
    (run,) = tmp_path.glob("outputs/train/*/*_posttrain_awbc")  # the preset names the folder
    events = EventAccumulator(str(run / "tb/critic"))
    events.Reload()
    assert [e.step for e in events.Scalars("critic/loss")] == list(range(1, 31))
    assert "train/loss" in EventAccumulator(str(run / "tb")).Reload().Tags()["scalars"]


def test_a_closed_loop_resumes_its_own_rounds_and_refuses_another_config(toy, tmp_path):
    """The config a closed loop compares is its first round's training run, as the rounds build it."""
    a, b = toy
    common = dict(data=DataConfig(roots=[str(a)], random_shift=0), steps=2, batch_size=4, threads=1)
    ckpt = Trainer(
        TrainConfig(
            policy=asdict(debug_config(chunk_size=4)), out=str(tmp_path / "base"), progress=False, **common
        )
    ).run()
    cfg = TrainConfig(
        init_from=str(ckpt),
        out=str(tmp_path / "loop"),
        loop=LoopConfig(rounds=2, base_rollouts_dir=str(b)),
        progress=False,
        **common,
    )
    Trainer(round_config(cfg, 1, ckpt)).run()  # round 1 as an interrupted closed loop left it
    check_inputs(dataclasses.replace(cfg, loop=dataclasses.replace(cfg.loop, rounds=3)))  # more rounds: fine
    with pytest.raises(InputError, match=r"loop: holds a run with another config \(steps: 2 != 3\)"):
        check_inputs(dataclasses.replace(cfg, steps=3))


def test_default_folder_names(tmp_path):
    now = datetime(2024, 5, 6, 7, 8, 9)
    first = default_out("debug", now=now, root=str(tmp_path))
    assert first == str(tmp_path / "2024-05-06/07-08-09_debug")
    Path(first).mkdir(parents=True)
    assert default_out("debug", now=now, root=str(tmp_path)).endswith("07-08-09_debug_1")  # taken: the next
    assert default_out("recap", 3, now=now, root=str(tmp_path)).endswith("07-08-09_recap_3")  # a sweep's job


def test_config_differences_ignore_what_does_not_change_the_result():
    cfg = TrainConfig(out="x")
    same = dataclasses.replace(cfg, out="y", threads=7, stop_after=3, progress=False, resume=False)
    same.env = dataclasses.replace(cfg.env, workers=9)
    assert config_differences(asdict(cfg), asdict(same)) == []
    other = dataclasses.replace(cfg, steps=5, algo={"name": "sft", "extra": 1})
    assert config_differences(asdict(cfg), asdict(other)) == [
        "algo.extra: (not set) != 1",
        "steps: 1000 != 5",
    ]


def test_the_log_holds_the_printed_lines_not_the_bar_redraws(tmp_path):
    with run_log(tmp_path):
        print("hello")
        for _ in tqdm(range(3), desc="bar", mininterval=0):
            tqdm.write("inside")
    text = (tmp_path / "train.log").read_text().splitlines()
    assert text[1:3] == ["hello", "inside"] and text.count("inside") == 3
    assert sum("bar" in line for line in text) <= 1  # at most the bar's last state


@pytest.mark.skipif(importlib.util.find_spec("wandb") is not None, reason="wandb is installed")
def test_wandb_is_off_by_default_and_refused_without_the_package(toy):
    a, _ = toy
    cfg = TrainConfig(data=DataConfig(roots=[str(a)]), wandb=WandbConfig(enable=True))
    assert TrainConfig().wandb.enable is False
    with pytest.raises(InputError, match="pip install wandb"):
        check_inputs(cfg)
