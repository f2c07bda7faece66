"""benchmarks/posttrain.py end to end at toy sizes, as the docs give it (``--quick --method recap --task
reach``): demos, the base SFT with the indicator, every baseline and the method in rounds, a second base for
the best baseline and method, the tables, the plot and the acceptance lines."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_posttrain_benchmark_quick_runs_the_baselines_and_the_method_in_rounds(tmp_path):
    cmd = [sys.executable, "benchmarks/posttrain.py", "--quick", "--method", "recap", "--task", "reach"]
    run = subprocess.run(
        [*cmd, "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=2400
    )
    assert run.returncode == 0, run.stderr[-3000:]
    for arm in ("control", "filtered_bc", "hg_dagger", "recap"):
        assert f"| {arm} |" in run.stdout
        for what in ("final success:", "takeovers per episode:", "lift over best baseline:"):
            assert f"{arm}: {what}" in run.stdout
    assert "base seed's share of the final success variance" in run.stdout
    record = json.loads((tmp_path / "reach" / "rounds_tune.json").read_text())
    assert record["settings"]["rounds"] == 2 and record["phase"] == "tune"  # --quick: never the report seeds
    assert {c["base_seed"] for c in record["cells"]} == {0, 1}
    assert len([c for c in record["cells"] if c["base_seed"] == 1]) == 4  # two arms x two seeds
    assert (tmp_path / "reach" / "rounds_tune.png").stat().st_size > 10_000
