"""One source per setting in vla-eval / vla-rollout / vla-collect: the task is ``task=`` (a different
``env.task`` is refused), the image size is the checkpoint's unless set (a different one is refused), the
execution horizon is ``deploy.horizon``."""

from dataclasses import fields

import pytest

from sim.collect import CollectConfig
from sim.deploy import match_policy_images
from sim.env import EnvConfig
from sim.evaluation import EvalConfig
from sim.rollout import RolloutConfig
from vla.errors import InputError
from vla.runtime.config import DeployConfig, ExecutorConfig


def _ckpt(tmp_path, image_size=None):
    """A checkpoint folder as far as the image size goes (its config.yaml)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    size = "" if image_size is None else f"image_size: {list(image_size)}\n"
    (tmp_path / "config.yaml").write_text("type: test_home\n" + size)
    return str(tmp_path)


def test_the_task_is_set_once(tmp_path):
    ckpt = _ckpt(tmp_path)
    assert EvalConfig(checkpoint=ckpt, task="push").env.task == "push"  # env.task follows task=
    assert EvalConfig(checkpoint=ckpt, task="push", env=EnvConfig(task="push")).env.task == "push"
    with pytest.raises(InputError, match=r"env\.task=stack differs from task=push"):
        EvalConfig(checkpoint=ckpt, task="push", env=EnvConfig(task="stack"))
    with pytest.raises(InputError, match=r"env\.task=stack differs from task=reach"):
        RolloutConfig(checkpoint=ckpt, task="reach", out=str(tmp_path / "ds"), env=EnvConfig(task="stack"))
    with pytest.raises(InputError, match=r"env\.task=stack differs from task=push"):
        CollectConfig(task="push", env=EnvConfig(task="stack"))
    assert CollectConfig(task="push").env.task == "push"


def test_the_image_size_is_the_checkpoints_unless_set(tmp_path):
    ckpt = _ckpt(tmp_path / "a", (32, 40))
    cfg, note = match_policy_images(EvalConfig(checkpoint=ckpt))
    assert cfg.env.image_size == (32, 40) and note == "env.image_size=[32, 40] (checkpoint)"
    cfg, note = match_policy_images(EvalConfig(checkpoint=ckpt, env=EnvConfig(image_size=(32, 40))))
    assert cfg.env.image_size == (32, 40) and note is None  # the user's, the same
    refused = r"image_size=\[96, 96\] differs from the checkpoint's image_size=\[32, 40\]"
    with pytest.raises(InputError, match=refused):
        match_policy_images(EvalConfig(checkpoint=ckpt, env=EnvConfig(image_size=(96, 96))))
    plain = _ckpt(tmp_path / "b")  # a checkpoint that does not say: the given size, else 96 x 96
    assert match_policy_images(EvalConfig(checkpoint=plain))[0].env.image_size == (96, 96)
    cfg, note = match_policy_images(EvalConfig(checkpoint=plain, env=EnvConfig(image_size=(24, 24))))
    assert cfg.env.image_size == (24, 24) and note is None


def test_the_horizon_is_a_field_of_the_deploy_config_only():
    assert "horizon" in {f.name for f in fields(DeployConfig)}
    assert "horizon" not in {f.name for f in fields(ExecutorConfig)}
    with pytest.raises(ValueError, match="horizon=0 must be >= 1"):
        DeployConfig(horizon=0)
    with pytest.raises(ValueError, match="horizon=3 must be 1"):
        DeployConfig(horizon=3, executor=ExecutorConfig(temporal_ensemble=0.01))
