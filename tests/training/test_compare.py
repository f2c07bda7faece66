"""The comparison harness's statistics, report and settings (training/compare), on synthetic cells; and
``vla-compare`` end to end on a toy base (slow)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from training.compare import report, stats
from training.compare.arms import arm_overrides, split
from training.compare.harness import CompareConfig, Settings, next_job
from vla.errors import InputError
from vla.provenance import record_json

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_posttrain import sim_base  # noqa: F401  (the fixture: three reach demos and a 3-step base)


def _cell(arm, seed, success, takeovers, base_seed=0, per_1000=5.0, outcomes=()):
    rows = [
        {"round": r, "success": s, "takeovers": t, "operator_frames": 10 * t, "time_to_success": 50.0,
         "per_1000_steps": per_1000, "eval_episodes": 10, "outcomes": list(outcomes)}
        for r, (s, t) in enumerate(zip(success, takeovers, strict=True))
    ]  # fmt: skip
    return {"arm": arm, "seed": seed, "base_seed": base_seed, "rounds": rows, "wall_minutes": 2.0}


def _record(cells, rounds=2):
    settings = {"rounds": rounds, "eval_episodes": 10, "round_eval_episodes": 5}
    return {"task": "reach", "seeds": 2, "settings": settings, "cells": cells}


def test_the_best_baseline_is_the_best_present_by_success_and_by_takeovers_separately():
    cells = []
    for s in range(2):
        cells += [
            _cell("control", s, [40, 50, 55], [1.0, 0.9, 0.8]),
            _cell("filtered_bc", s, [40, 60, 70 + s], [1.0, 0.8, 0.7]),
            _cell("hg_dagger", s, [40, 55, 65], [1.0, 0.5, 0.3 + 0.1 * s]),  # fewest takeovers
            _cell("recap", s, [40, 62, 75 + 2 * s], [1.0, 0.6, 0.4]),
        ]
    rows = stats.per_seed(cells)
    s = stats.summarise(
        rows, ["control", "filtered_bc", "hg_dagger"], ["control", "filtered_bc", "hg_dagger", "recap"]
    )
    assert s["best_baseline"] == "filtered_bc" and s["best_baseline_takeovers"] == "hg_dagger"
    recap = s["arms"]["recap"]
    assert recap["lift_over_best_baseline"][0] == pytest.approx(5.5)  # paired: 75-70, 77-71
    assert recap["takeovers_vs_best_baseline"][0] == pytest.approx(0.05)  # 0.4-0.3, 0.4-0.4
    assert s["arms"]["filtered_bc"]["lift_over_best_baseline"][0] == 0.0

    record = _record(cells)
    lines = report.acceptance_lines(record)
    for arm in ("control", "filtered_bc", "hg_dagger", "recap"):
        for what in ("final success:", "takeovers per episode:", "lift over best baseline:"):
            assert any(line.startswith(f"{arm}: {what}") for line in lines), (arm, what)
    assert "recap: lift over best baseline: +5.5 [" in "\n".join(lines)
    table = report.rounds_table(record)
    assert "| recap | 40 / 1.00 | 62 / 0.60 | 76 / 0.40 |" in table  # per round: success / takeovers


def test_a_record_prints_the_same_lines_and_plots_one_line_per_arm(tmp_path, capsys):
    cells = [_cell(a, s, [30, 50 + s], [1.0, 0.5]) for a in ("control", "hg_dagger", "apo") for s in range(2)]
    cells[0]["rounds"][-1]["time_to_success"] = math.nan  # a seed without a success: no time to success
    record = _record(cells, rounds=1)
    path = tmp_path / "r.json"
    path.write_text(record_json(record))  # strict JSON: the NaN is written as null
    assert json.loads(path.read_text())["cells"][0]["rounds"][-1]["time_to_success"] is None
    report.from_record(path)
    assert capsys.readouterr().out.splitlines() == report.acceptance_lines(record)
    report.plot(record, tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 10_000
    with pytest.raises(InputError, match=r"missing\.json: no such record"):
        report.from_record(tmp_path / "missing.json")
    (tmp_path / "cut.json").write_text(path.read_text()[:100])  # a record cut off mid-write
    with pytest.raises(InputError, match=r"cut\.json: not a readable JSON record"):
        report.from_record(tmp_path / "cut.json")


def test_paired_time_to_success_compares_only_the_episodes_both_arms_succeed_on():
    # [success, steps, episode seed]: the fast arm fails the hard episode 12, which the slow arm takes 150
    # steps to solve; over its own successes the fast arm looks 42 steps faster, on the shared ones 10
    fast = [[True, 40, 10], [True, 50, 11], [False, 160, 12]]
    slow = [[True, 50, 10], [True, 60, 11], [True, 150, 12]]
    rows = [{"fast": {"outcomes": fast}, "slow": {"outcomes": slow}}] * 2
    assert stats.paired_time(rows, "fast", "slow") == [-10.0, -10.0]
    no_shared = [{"fast": {"outcomes": fast}, "slow": {"outcomes": [[False, 160, 10]]}}]
    assert math.isnan(stats.paired_time(no_shared, "fast", "slow")[0])  # never a number from one arm alone


def test_the_base_seeds_share_of_the_variance():
    def cells(means):  # two bases, three training seeds each, spread +-1 around each base's mean
        return [_cell("recap", s, [0, m + d], [0, 0], base_seed=b) for b, m in enumerate(means)
                for s, d in enumerate((-1, 0, 1))]  # fmt: skip

    assert stats.base_share(cells([50, 70]), "recap")["share"] > 0.95  # the bases differ by 20 points
    assert stats.base_share(cells([60, 60]), "recap")["share"] == 0.0  # they do not
    assert stats.base_share(cells([60]), "recap") is None  # one base: nothing to say


def test_settings_and_arms_are_refused_by_name():
    base = {"task": "reach", "data": ["d"], "out": "o", "base": "ckpt"}
    with pytest.raises(ValueError, match="tune phase"):
        CompareConfig(**base, arms=["control", "recap"], extra=["algo.critic.beta=1"])
    with pytest.raises(ValueError, match="at least one baseline"):
        CompareConfig(**base, arms=["recap"])
    with pytest.raises(ValueError, match="unknown arm 'recapp'"):
        CompareConfig(**base, arms=["control", "recapp"])
    with pytest.raises(ValueError, match="base_overrides"):
        CompareConfig(**base, arms=["control"], base_seeds=2)
    with pytest.raises(ValueError, match=">= 1"):
        Settings(rounds=0)
    cfg = CompareConfig(**base, arms=["recap", "hg_dagger", "control", "recap"])
    assert cfg.arms == ["control", "hg_dagger", "recap"]  # baselines first, once each
    assert split(["apo", "control"]) == (["control"], ["apo"])
    # a candidate's critic overrides reach the methods with a critic only; baselines take none
    extra = ["algo.critic.beta=0.5", "steps=7"]
    assert arm_overrides("recap", extra) == ["experiment=posttrain_recap", *extra]
    assert arm_overrides("apo", extra) == ["experiment=posttrain_apo", "steps=7"]
    assert arm_overrides("control", extra) == ["experiment=posttrain_sft"]


def test_rollout_collecting_arms_start_first_then_the_costliest():
    ready = [(0, "filtered_bc"), (0, "recap"), (0, "aloe"), (0, "habc"), (2, "control")]
    order = []
    while ready:
        job = next_job(ready, "control")
        ready.remove(job)
        order.append(job)
    # seed 2's control unlocks its other arms; ALOE (about five times an arm's wall) must not start last
    assert order == [(2, "control"), (0, "aloe"), (0, "filtered_bc"), (0, "recap"), (0, "habc")]


@pytest.mark.slow
def test_vla_compare_runs_rounds_per_arm_and_resumes_from_its_cache(sim_base, tmp_path):  # noqa: F811
    demos, base = sim_base
    cmd = ["vla-compare", "--task", "reach", "--data", str(demos), "--base", str(base)]
    cmd += ["--arms", "control", "recap", "--rounds", "2", "--seeds", "2", "--steps", "2", "--rollouts", "2"]
    cmd += ["--eval-episodes", "3", "--round-eval-episodes", "2", "--out", str(tmp_path)]
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    # the presets execute 10 actions a chunk; the toy base's chunks hold 8: refused in one line
    long = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert long.returncode != 0 and "Traceback" not in long.stderr
    assert "horizon=10 is longer than the policy's chunks (H=8)" in long.stderr
    cmd += ["--horizon", "4"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    for arm in ("control", "recap"):
        for what in ("final success:", "takeovers per episode:", "lift over best baseline:"):
            assert f"{arm}: {what}" in first.stdout
    record = json.loads(next(tmp_path.rglob("comparison.json")).read_text())
    assert len(record["cells"]) == 4 and record["from_cache"] == []
    for cell in record["cells"]:
        assert [r["eval_episodes"] for r in cell["rounds"][1:]] == [2, 3]  # fewer before the last round
        assert all(r["takeovers"] == r["takeovers"] for r in cell["rounds"])  # every row measured
    # each arm's round-2 rollouts are its own round-1 checkpoint's
    made = {}
    for cell in record["cells"]:
        eps = Path(cell["out"]) / "round_2" / "rollouts" / "meta" / "vla_episodes.jsonl"
        made[cell["arm"], cell["seed"]] = {json.loads(line)["extra"]["checkpoint"] for line in eps.open()}
    assert made["control", 0] != made["recap", 0]
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert second.returncode == 0 and "rounds ->" not in second.stdout  # every lineage from the cache
    assert len(json.loads(next(tmp_path.rglob("comparison.json")).read_text())["from_cache"]) == 4


def test_rounds_before_the_last_evaluate_on_round_eval_episodes():
    from training.config import EvalDuringTraining, LoopConfig, TrainConfig
    from training.rounds import round_config

    env = EvalDuringTraining(runner="sim", task="reach", episodes=100)
    cfg = TrainConfig(env=env, loop=LoopConfig(rounds=3, round_eval_episodes=15), out="o", init_from="b")
    assert [round_config(cfg, r, "b").env.episodes for r in (1, 2, 3)] == [15, 15, 100]
    unset = TrainConfig(env=env, loop=LoopConfig(rounds=3), out="o", init_from="b")
    assert [round_config(unset, r, "b").env.episodes for r in (1, 2, 3)] == [100, 100, 100]
    with pytest.raises(ValueError, match="round_eval_episodes=0"):
        LoopConfig(rounds=3, round_eval_episodes=0)
