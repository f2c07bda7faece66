"""A checkpoint deploys the way it was validated: ``deploy.yaml`` (execution horizon, conditioning,
guidance, sampler steps) written by training and read by the one deployment assembly; explicit arguments
win; a checkpoint without the file deploys as before."""

import json
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from hardware.profiles import PROFILES
from policies.flow_matching import debug_config
from sim.collect import CollectConfig, collect
from sim.env import EnvConfig
from sim.evaluation import EvalConfig, evaluate
from sim.tasks.reach import Reach
from training.config import EvalDuringTraining, TrainConfig, TrainDeployConfig
from training.data import DataConfig
from training.loop import Trainer
from vla.errors import InputError
from vla.runtime.config import DeployConfig, ExecutorConfig
from vla.runtime.defaults import DEFAULTS_FILE, DeployDefaults, resolve
from vla.runtime.deployment import deploy_checkpoint

BIN = Path(sys.executable).parent
CHUNK = 8  # the debug policy's H


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Two SFT steps of the debug policy on three reach demos, with the preset's horizon ``deploy.horizon=3``
    (evaluation during training off); returns (demos, checkpoint)."""
    tmp = tmp_path_factory.mktemp("defaults")
    demos = tmp / "demos"
    collect(
        CollectConfig(
            task="reach", episodes=3, out=str(demos), progress=False, env=EnvConfig(image_size=(32, 32))
        )
    )
    cfg = TrainConfig(
        policy=asdict(debug_config()),
        data=DataConfig(roots=[str(demos)], random_shift=0),
        env=EvalDuringTraining(runner=None),
        deploy=TrainDeployConfig(horizon=3),
        out=str(tmp / "sft"),
        steps=2,
        batch_size=4,
        threads=1,
        progress=False,
    )
    return demos, Trainer(cfg).run()


def _eval(ckpt, out, **kw) -> EvalConfig:
    kw = {"task": "reach", "episodes": 1, "workers": 0, "videos": 0, "progress": False, **kw}
    return EvalConfig(checkpoint=str(ckpt), out=str(out), env=EnvConfig(image_size=(32, 32)), **kw)


def test_a_trained_checkpoint_carries_its_deployment_defaults(trained):
    _, ckpt = trained
    saved = yaml.safe_load((ckpt / DEFAULTS_FILE).read_text())
    told = saved.pop("instruction")  # the demos' most frequent paraphrase of the reach task
    assert told in Reach.instructions
    assert saved == {"horizon": 3, "cond": None, "guidance": None, "num_steps": 4}  # debug: 4 Euler steps
    assert DeployDefaults.load(ckpt) == DeployDefaults(horizon=3, num_steps=4, instruction=told)


def test_post_training_keeps_the_base_horizon_unless_its_preset_sets_one(trained, tmp_path):
    demos, ckpt = trained

    def post(out, horizon):
        cfg = TrainConfig(
            data=DataConfig(roots=[str(demos)], random_shift=0),
            env=EvalDuringTraining(runner=None),
            deploy=TrainDeployConfig(horizon=horizon),
            init_from=str(ckpt),
            out=str(out),
            steps=1,
            batch_size=4,
            threads=1,
            progress=False,
        )
        return DeployDefaults.load(Trainer(cfg).run())

    assert post(tmp_path / "inherit", None).horizon == 3
    assert post(tmp_path / "own", 5).horizon == 5
    assert post(tmp_path / "too_long", 50).horizon is None  # longer than H: whole chunks


def test_vla_eval_without_deploy_arguments_runs_the_checkpoint_horizon(trained, tmp_path):
    _, ckpt = trained
    out = tmp_path / "cli"
    args = [str(BIN / "vla-eval"), f"checkpoint={ckpt}", "task=reach", "episodes=1", "workers=0"]
    res = subprocess.run(
        [*args, "videos=0", f"out={out}"], capture_output=True, text=True, timeout=300, check=False
    )
    assert res.returncode == 0, res.stdout + res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("deploy: "))
    assert line == (
        "deploy: horizon=3 (checkpoint), cond=none (default), guidance=none (default), "
        "num_steps=4 (checkpoint)"
    )
    summary = json.loads((out / "eval.json").read_text())["summary"]
    assert (summary["horizon"], summary["chunk_size"]) == (3, CHUNK)
    assert summary["deploy"]["horizon"] == {"value": 3, "source": "checkpoint"}


def test_an_explicit_argument_wins_even_when_it_equals_a_default(trained, tmp_path):
    _, ckpt = trained
    deploy = DeployConfig(horizon=CHUNK)  # = the whole chunk, the built-in default
    res = evaluate(_eval(ckpt, tmp_path / "h8", deploy=deploy, num_steps=2))
    assert res.episodes[0].horizon == CHUNK
    s = res.settings
    assert s is not None and (s.horizon, s.sources["horizon"]) == (CHUNK, "argument")
    assert (s.num_steps, s.sources["num_steps"]) == (2, "argument")
    ensembling = DeployConfig(executor=ExecutorConfig(temporal_ensemble=0.01))
    ensembled = resolve(ckpt, ensembling)  # samples every step: h = 1
    assert (ensembled.horizon, ensembled.sources["horizon"]) == (1, "argument")


def test_the_ros_node_path_gets_the_checkpoint_defaults(trained):
    """``deploy_checkpoint`` with a DeployConfig built from no overrides (as the ROS node's
    ``deploy_config([])``) and no sampling arguments."""
    _, ckpt = trained
    cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(DeployConfig()), {}))
    d = deploy_checkpoint(ckpt, PROFILES.get("panda"), cfg, available_cameras=["agentview", "wrist"])
    assert d.stack.executor.horizon == 3 and d.runner.num_steps == 4
    assert d.settings.sources == {
        "horizon": "checkpoint",
        "cond": "default",
        "guidance": "default",
        "num_steps": "checkpoint",
    }
    d.stack.close()


def test_a_checkpoint_without_deploy_yaml_deploys_as_before(trained, tmp_path):
    _, ckpt = trained
    old = tmp_path / "old"
    shutil.copytree(ckpt, old)
    (old / DEFAULTS_FILE).unlink()
    config = yaml.safe_load((old / "config.yaml").read_text())
    (old / "config.yaml").write_text(yaml.safe_dump({**config, "inference_cond": 1}))  # e.g. RECAP's
    res = evaluate(_eval(old, tmp_path / "out"))
    assert res.episodes[0].horizon == CHUNK  # the whole chunk, as before
    s = res.settings
    assert s is not None and s.sources["horizon"] == "default"
    assert (s.cond, s.sources["cond"]) == (1, "checkpoint")  # config.yaml's inference_cond still counts
    assert "horizon=8, the whole chunk (default)" in s.describe()


@pytest.mark.parametrize(
    ("text", "match"),
    [("horizon: 0\n", "horizon=0 must be >= 1"), ("step: 3\n", r"unknown field\(s\) \['step'\]")],
)
def test_a_broken_deploy_yaml_is_refused_naming_the_file(trained, tmp_path, text, match):
    _, ckpt = trained
    bad = tmp_path / "bad"
    shutil.copytree(ckpt, bad)
    (bad / DEFAULTS_FILE).write_text(text)
    with pytest.raises(InputError, match=rf"deploy\.yaml: .*{match}"):
        resolve(bad, DeployConfig())
    (bad / DEFAULTS_FILE).write_text("horizon: 9\n")
    with pytest.raises(InputError, match="horizon=9 is longer than the policy's chunks"):
        resolve(bad, DeployConfig())
    assert resolve(bad, DeployConfig(horizon=2)).horizon == 2  # an argument needs no file value
