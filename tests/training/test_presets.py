"""The task a training run evaluates and the critic's T_max come from the data (training/presets.py)."""

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import training.presets
from training.config import EvalDuringTraining, TrainConfig
from training.data import DataConfig
from training.presets import resolve_task
from vla.data.schema import EpisodeMeta
from vla.errors import InputError
from vla.hydra_utils import CONFIG_DIR


def _episodes(task: str | None, lengths: list[int]) -> list[EpisodeMeta]:
    extra = {"task_name": task} if task else {}  # a plain LeRobot dataset: extra={}
    return [EpisodeMeta(i, n, True, "demo", "do it", dict(extra)) for i, n in enumerate(lengths)]


@pytest.fixture
def data(monkeypatch):
    """Datasets by name: ``<task>`` (sidecar task_name, episodes of 40 and 70 frames) or ``plain``."""
    lengths = {"plain": [30, 55], "pick_place": [40, 70], "reach": [20, 25], "real_task": [90, 120]}

    def read(root):
        return _episodes(None if root == "plain" else root, lengths[root])

    monkeypatch.setattr(training.presets, "read_episode_info", read)


def _cfg(roots, task=None, runner="sim", t_max=None) -> TrainConfig:
    algo = {"name": "recap", "critic": {"reward": {"c_fail": 300.0, "t_max": t_max}}}
    env = EvalDuringTraining(runner=runner, task=task)
    return TrainConfig(data=DataConfig(roots=list(roots)), env=env, algo=algo)


def test_the_task_and_its_limit_come_from_the_data(data, capsys):
    cfg = _cfg(["pick_place", "pick_place"])
    resolve_task(cfg)
    assert cfg.env.task == "pick_place" and cfg.algo["critic"]["reward"]["t_max"] == 160  # pick_place's
    out = capsys.readouterr().out.strip().splitlines()
    said = "env.task=pick_place (from the data), algo.critic.reward.t_max=160 (pick_place's episode limit)"
    assert out == [said]
    resolve_task(cfg)  # again (a closed loop's round): nothing more to take, nothing printed
    assert capsys.readouterr().out == ""
    given = _cfg(["reach"], task="reach", t_max=50)
    resolve_task(given)
    assert (given.env.task, given.algo["critic"]["reward"]["t_max"]) == ("reach", 50)


def test_refusals_name_both_sides(data):
    with pytest.raises(InputError, match=r"several tasks \(pick_place: 2 episodes, reach: 2 episodes\)"):
        resolve_task(_cfg(["pick_place", "reach"]))
    with pytest.raises(InputError, match=r"env\.task=reach but the data .* is of task pick_place"):
        resolve_task(_cfg(["pick_place"], task="reach"))
    with pytest.raises(InputError, match=r"the data names no task .* pass env\.task=<name> or env=none"):
        resolve_task(_cfg(["plain"]))  # a plain LeRobot dataset with evaluation on


def test_without_a_simulator_task_t_max_is_the_longest_episode(data, capsys):
    plain = _cfg(["plain"], runner=None)
    resolve_task(plain)
    assert plain.env.task is None and plain.algo["critic"]["reward"]["t_max"] == 55
    real = _cfg(["real_task"], runner=None)
    resolve_task(real)
    assert real.env.task == "real_task" and real.algo["critic"]["reward"]["t_max"] == 120
    assert "t_max=120 (the longest episode in the data)" in capsys.readouterr().out


def test_the_presets_leave_task_and_t_max_to_the_data():
    import training.scripts.train  # noqa: F401  (registers train_schema)

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        for arm in ("recap", "aloe", "awbc", "habc", "flow_dpo", "apo", "sft"):
            cfg = compose("train", overrides=[f"experiment=posttrain_{arm}"])
            assert cfg.env.task is None and cfg.deploy.horizon == 10, arm
            if "critic" in cfg.algo:
                assert cfg.algo.critic.reward.t_max is None, arm
        typed = OmegaConf.to_object(
            compose("train", overrides=["experiment=posttrain_sft", "deploy.horizon=3"])
        )
        assert typed.deploy.horizon == 3 and typed.env.task is None
