"""Data-parallel training: `vla-train` under `torchrun` (two processes, gloo on the CPU) takes the steps one
process takes on the same global batch, for a critic method (AWBC: the critic fitted on every rank, the
actor's weighted loss) and for SFT (whose two-rank checkpoint then resumes on one); rank 0 alone writes."""

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from launched import BIN, COMMON, losses, run, same_weights, weights
from toy_episodes import write_toy_episodes


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy_episodes(tmp_path_factory.mktemp("ddp") / "toy", n=8)


def test_two_processes_take_the_steps_one_process_takes_on_the_global_batch(toy, tmp_path):
    # a critic method: the critic fitted on every rank, the actor's weighted loss normalised over the global
    # batch (SFT: the resume test below)
    args = [*COMMON, f"data.roots=[{toy}]", "steps=6", "algo=awbc"]
    args += ["algo.critic.steps=20", "algo.critic.batch_size=16"]
    one, two = tmp_path / "one", tmp_path / "two"
    run([*args, f"out={one}"], tmp_path)
    out = run([*args, f"out={two}"], tmp_path, ranks=2)
    assert "2 data-parallel processes" in out
    a, b = losses(one), losses(two)
    assert len(a) == len(b) == 6
    assert a == pytest.approx(b, rel=1e-4, abs=1e-5)  # the ranks' mean loss: the global batch's
    same_weights(weights(one), weights(two))
    assert not (two / ".ranks").exists()  # rank 1's scratch folder is gone; rank 0 wrote the run folder


def test_a_checkpoint_from_two_ranks_resumes_on_one_and_refuses_an_uneven_batch(toy, tmp_path):
    args = [*COMMON, f"data.roots=[{toy}]", "steps=6", "save_every=3"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    run([*args, f"out={straight}"], tmp_path)
    run([*args, f"out={split}", "stop_after=3"], tmp_path, ranks=2)
    run([*args, f"out={split}"], tmp_path)  # the same run, resumed by one process
    # SFT: steps 1-3 on two processes, 4-6 on one, each loss the one-process run's on the global batch
    assert losses(split) == pytest.approx(losses(straight), rel=1e-4, abs=1e-5)
    same_weights(weights(straight), weights(split))

    cmd = [str(BIN / "torchrun"), "--standalone", "--nproc_per_node", "2", "-m", "training.scripts.train"]
    res = subprocess.run(
        [*cmd, *COMMON, f"data.roots=[{toy}]", "batch_size=7", f"out={tmp_path / 'odd'}"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode != 0 and "batch_size=7 is the global batch" in res.stderr
