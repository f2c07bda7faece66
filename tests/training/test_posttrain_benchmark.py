"""benchmarks/posttrain.py end to end at toy sizes (``--quick``): demos, base SFT, shared rollouts, every
arm through training/closed_loop.py (two seeds, two arms at a time in worker processes), the table and the
acceptance lines; a second run, one arm at a time, reuses every arm."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_posttrain_benchmark_quick_runs_every_arm_and_caches(tmp_path):
    cmd = [sys.executable, "posttrain.py", "--method", "all", "--task", "reach", "--seeds", "2", "--quick"]
    cmd += ["--out", str(tmp_path), "--threads", "1"]
    first = subprocess.run(
        [*cmd, "--jobs", "2"], cwd=ROOT / "benchmarks", capture_output=True, text=True, timeout=1800
    )
    assert first.returncode == 0, first.stderr[-3000:]
    for arm in ("control", "filtered_bc", "recap", "aloe", "habc", "awbc", "apo", "flow_dpo", "habc_mc"):
        assert f"| {arm} |" in first.stdout
    for m in ("recap", "aloe", "habc", "awbc", "apo", "flow_dpo", "habc_mc"):
        assert f"{m}: lift over control:" in first.stdout and f"{m}: lift over filtered BC:" in first.stdout
        assert f"{m}: time to success: {m}" in first.stdout
        assert f"{m}: time to success on the episodes both succeed:" in first.stdout
    # the second table: where each method's actor signal goes, per part of the data design
    lines = first.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("| (frames) |"))
    for line in lines[at : at + 8]:  # the frames' shares, then each method's shares of its signal
        cells = [c.strip() for c in line.strip("| ").split("|")]
        assert sum(float(v) for v in cells[1:]) == pytest.approx(100.0, abs=0.5), line
    assert [line.split("|")[1].strip() for line in lines[at + 1 : at + 8]] == [
        "recap",
        "aloe",
        "habc",
        "awbc",
        "apo",
        "flow_dpo",
        "habc_mc",  # the ablation arm
    ]
    rollouts = list(tmp_path.rglob("rollouts_round1/meta/vla_episodes.jsonl"))
    assert len(rollouts) == 2  # one rollout set per seed, shared by every arm of the seed
    assert len(list(tmp_path.rglob("seed_*/*.log"))) == 18  # each worker's output in its own log
    assert "18 of 18 arms trained by this invocation, 0 from the cache" in first.stdout
    second = subprocess.run(cmd, cwd=ROOT / "benchmarks", capture_output=True, text=True, timeout=600)
    assert second.returncode == 0 and "== seed_0" not in second.stdout  # every arm came from its cache
    assert "0 of 18 arms trained by this invocation, 18 from the cache" in second.stdout  # and says so


def test_the_benchmark_starts_rollout_collecting_arms_first_then_the_costliest():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from posttrain import next_job

    ready = [(0, "filtered_bc"), (0, "recap"), (0, "aloe"), (0, "habc"), (2, "control")]
    order = []
    while ready:
        job = next_job(ready, "control")
        ready.remove(job)
        order.append(job)
    # seed 2's control unlocks six arms; ALOE (about five times an arm's wall) must not start last
    assert order == [(2, "control"), (0, "aloe"), (0, "filtered_bc"), (0, "recap"), (0, "habc")]


def test_paired_time_to_success_compares_only_the_episodes_both_arms_succeed_on(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from posttrain import from_record, paired_time

    # [success, steps, episode seed]: the fast arm fails the hard episode 12, which the slow arm takes 150
    # steps to solve; over its own successes the fast arm looks 42 steps faster, on the shared ones 10
    fast = [[True, 40, 10], [True, 50, 11], [False, 160, 12]]
    slow = [[True, 50, 10], [True, 60, 11], [True, 150, 12]]
    rows = [{"fast": {"outcomes": fast}, "slow": {"outcomes": slow}}] * 2
    assert paired_time(rows, "fast", "slow") == [-10.0, -10.0]
    no_shared = [{"fast": {"outcomes": fast}, "slow": {"outcomes": [[False, 160, 10]]}}]
    assert math.isnan(paired_time(no_shared, "fast", "slow")[0])  # never a number from one arm alone

    metrics = {"success": 50.0, "time_to_success": 45.0, "per_1000_steps": 5.0}
    control = {**metrics, "outcomes": slow}
    record = {
        "arms": {
            "control": [control] * 2,
            "filtered_bc": [control] * 2,
            "m": [{**metrics, "outcomes": fast}] * 2,
        }
    }
    (tmp_path / "r.json").write_text(json.dumps(record))
    from_record(tmp_path / "r.json")
    assert "m: time to success on the episodes both succeed: -10.0" in capsys.readouterr().out
