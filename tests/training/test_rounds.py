"""Closed-loop rounds keep one lineage per run: two runs from one base share round 1's rollouts (made by the
base), and each run's round 2 rollouts are made by its own round 1 checkpoint; rounds.json reports each
checkpoint's takeovers from the rollouts it made."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from sim.runner import SimRunner
from training import loop
from training.closed_loop import collect_rollouts, lineage_minutes, write_rounds
from training.config import EvalDuringTraining, LoopConfig, TrainConfig, TrainDeployConfig
from training.data import DataConfig
from training.run import train
from vla.data import load_episode
from vla.data.sidecar import read_sidecar
from vla.errors import InputError
from vla.hydra_utils import refuse_renamed

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_posttrain import sim_base  # noqa: F401  (the fixture: three reach demos and a 3-step SFT base)

TELEOP = {"stall_steps": 5, "length": 60}


def _arm(demos: Path, base: Path, out: Path, shared: Path, seed: int) -> TrainConfig:
    return TrainConfig(
        init_from=str(base),
        data=DataConfig(roots=[str(demos)], random_shift=0),
        env=EvalDuringTraining(runner="sim", task="reach", episodes=2, workers=0),
        deploy=TrainDeployConfig(horizon=4),
        loop=LoopConfig(
            rounds=2, rollout_episodes=2, teleop=TELEOP, base_rollouts_dir=str(shared), evaluate_base=False
        ),
        out=str(out),
        steps=3,
        batch_size=8,
        seed=seed,
        threads=1,
        progress=False,
    )


def test_two_runs_share_round_one_and_keep_their_own_lineage(sim_base, tmp_path):  # noqa: F811
    demos, base = sim_base
    shared = tmp_path / "base_rollouts"
    a, b = _arm(demos, base, tmp_path / "a", shared, 0), _arm(demos, base, tmp_path / "b", shared, 1)
    with pytest.raises(InputError, match=r"training\.run\.train"):  # loop.py runs no rounds
        loop.train(a)
    for cfg in (a, b):
        train(cfg)
    rows = {arm: json.loads((tmp_path / arm / "rounds.json").read_text()) for arm in "ab"}
    # round 1: one folder, made by the base, not collected again by the second run
    assert not (tmp_path / "a/round_1/rollouts").exists() and not (tmp_path / "b/round_1/rollouts").exists()
    assert {e.extra["checkpoint"] for e in read_sidecar(shared)} == {str(base)}
    assert len(read_sidecar(shared)) == 2
    # round 2: each run's own folder, made by its own round 1 checkpoint, on the same seeds
    made = {}
    for arm in "ab":
        eps = read_sidecar(tmp_path / arm / "round_2/rollouts")
        assert {e.extra["checkpoint"] for e in eps} == {rows[arm][1]["checkpoint"]}
        made[arm] = eps
    assert rows["a"][1]["checkpoint"] != rows["b"][1]["checkpoint"]
    assert [e.extra["seed"] for e in made["a"]] == [e.extra["seed"] for e in made["b"]]
    ours = load_episode(tmp_path / "a/round_2/rollouts", 0)["action"]
    theirs = load_episode(tmp_path / "b/round_2/rollouts", 0)["action"]
    assert ours.shape != theirs.shape or not np.array_equal(ours, theirs)
    # each row: its checkpoint's takeovers, from the rollouts it made (the last one's: one more collection)
    for arm in "ab":
        r = rows[arm]
        assert [x["round"] for x in r] == [0, 1, 2]
        assert r[0]["operator_rollouts"] == str(shared) and "success_rate" not in r[0]  # evaluate_base=false
        for i in (1, 2):
            assert r[i]["operator_rollouts"] == str(tmp_path / arm / f"round_{i + 1}/rollouts")
            assert {"success_rate", "success_length_mean", "successes_per_1000_steps"} <= set(r[i])
        # each round's compute, on its own row (so the rows add up right across an interruption)
        assert all(x["wall_minutes"] > 0 for x in r[1:]) and "wall_minutes" not in r[0]
        assert lineage_minutes(r) == pytest.approx(r[1]["wall_minutes"] + r[2]["wall_minutes"], abs=0.011)
        for x in r:
            assert x["takeovers_ci_low"] <= x["takeovers_per_episode"] <= x["takeovers_ci_high"]
            assert x["operator_frames_per_episode"] is not None
        assert (tmp_path / arm / "rounds.png").stat().st_size > 1000
    # an interrupted round (no row yet) trains again from its start, its kept rollouts reused: its row
    # times all of its training, not the rest after a checkpoint
    a_dir = tmp_path / "a"
    write_rounds(a_dir / "rounds.json", rows["a"][:2])
    (a_dir / "round_2/train/left_by_the_interrupted_run").write_text("")
    before = read_sidecar(a_dir / "round_2/rollouts")
    train(a)
    again = json.loads((a_dir / "rounds.json").read_text())
    assert [x["round"] for x in again] == [0, 1, 2]
    assert not (a_dir / "round_2/train/left_by_the_interrupted_run").exists()
    assert again[2]["success_rate"] == rows["a"][2]["success_rate"]  # the same round, redone
    assert read_sidecar(a_dir / "round_2/rollouts") == before
    # the shared folder refuses another checkpoint's collection, before any episode runs
    runner = SimRunner(task="reach", episodes=1, workers=0, horizon=4, out=str(tmp_path / "eval"))
    with pytest.raises(InputError, match=r"episode 0 was made by .* not by .*round_1"):
        collect_rollouts(
            runner, Path(rows["a"][1]["checkpoint"]), shared, episodes=2, seed=100_002, teleop=TELEOP
        )


def test_the_old_shared_rollouts_key_is_refused_with_one_line():
    with pytest.raises(InputError, match=r"loop.rollouts_dir= is now loop.base_rollouts_dir="):
        refuse_renamed(["loop.rollouts_dir=/tmp/r{round}"])
    with pytest.raises(ValueError, match=r"round 1's rollouts only"):
        LoopConfig(base_rollouts_dir="/tmp/r{round}")


def test_rounds_json_is_strict_json_and_an_untimed_row_leaves_the_compute_unknown(tmp_path):
    path = tmp_path / "rounds.json"
    rows = [
        {"round": 0, "checkpoint": "base"},
        {"round": 1, "success_length_mean": float("nan"), "outcomes": [[False, 80, 1]], "wall_minutes": 2.5},
        {"round": 2, "success_length_mean": 7.0, "wall_minutes": 1.25},
    ]
    write_rounds(path, rows)

    def refuse(name):
        raise AssertionError(f"rounds.json holds {name}")

    back = json.loads(path.read_text(), parse_constant=refuse)
    assert back[1]["success_length_mean"] is None and back[2]["success_length_mean"] == 7.0
    assert lineage_minutes(back) == 3.75
    del back[2]["wall_minutes"]  # a row from a version that did not time its round
    assert lineage_minutes(back) is None
