"""Data-parallel training: `vla-train` under `torchrun` (two processes, gloo on the CPU) takes the steps one
process takes on the same global batch, for a critic method (AWBC: the critic fitted on every rank, the
actor's weighted loss) and for SFT (whose two-rank checkpoint then resumes on one); rank 0 alone writes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from toy_episodes import write_toy_episodes

BIN = Path(sys.executable).parent
COMMON = ["experiment=debug", "batch_size=8", "threads=1", "progress=false", "log_every=1", "save_every=100"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy_episodes(tmp_path_factory.mktemp("ddp") / "toy", n=8)


def _run(args: list[str], cwd: Path, ranks: int = 1) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if ranks == 1:
        cmd = [str(BIN / "vla-train"), *args]
    else:  # the launcher users run: torchrun starts the processes and sets RANK / WORLD_SIZE
        cmd = [str(BIN / "torchrun"), "--standalone", "--nproc_per_node", str(ranks)]
        cmd += ["-m", "training.scripts.train", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout


def _losses(run: Path, scalar: str = "loss") -> list[float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tb")).Reload()
    return [e.value for e in events.Scalars(f"train/{scalar}")]


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run / "checkpoints/last/model.safetensors"))


def _same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    """The same weights up to summation order: Adam divides a near-zero gradient (a conv bias under a norm
    layer) by its own tiny scale, so such a tensor may move by up to a step's size (lr); all others agree."""
    close = [k for k in a if torch.allclose(a[k], b[k], atol=1e-5)]
    assert len(close) >= 0.9 * len(a), sorted(set(a) - set(close))
    assert all(torch.allclose(a[k], b[k], atol=2e-3) for k in a)


def test_two_processes_take_the_steps_one_process_takes_on_the_global_batch(toy, tmp_path):
    # a critic method: the critic fitted on every rank, the actor's weighted loss normalised over the global
    # batch (SFT: the resume test below)
    args = [*COMMON, f"data.roots=[{toy}]", "steps=6", "algo=awbc"]
    args += ["algo.critic.steps=20", "algo.critic.batch_size=16"]
    one, two = tmp_path / "one", tmp_path / "two"
    _run([*args, f"out={one}"], tmp_path)
    out = _run([*args, f"out={two}"], tmp_path, ranks=2)
    assert "2 data-parallel processes" in out
    a, b = _losses(one), _losses(two)
    assert len(a) == len(b) == 6
    assert a == pytest.approx(b, rel=1e-4, abs=1e-5)  # the ranks' mean loss: the global batch's
    _same_weights(_weights(one), _weights(two))
    assert not (two / ".ranks").exists()  # rank 1's scratch folder is gone; rank 0 wrote the run folder


def test_a_checkpoint_from_two_ranks_resumes_on_one_and_refuses_an_uneven_batch(toy, tmp_path):
    args = [*COMMON, f"data.roots=[{toy}]", "steps=6", "save_every=3"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    _run([*args, f"out={straight}"], tmp_path)
    _run([*args, f"out={split}", "stop_after=3"], tmp_path, ranks=2)
    _run([*args, f"out={split}"], tmp_path)  # the same run, resumed by one process
    # SFT: steps 1-3 on two processes, 4-6 on one, each loss the one-process run's on the global batch
    assert _losses(split) == pytest.approx(_losses(straight), rel=1e-4, abs=1e-5)
    _same_weights(_weights(straight), _weights(split))

    cmd = [str(BIN / "torchrun"), "--standalone", "--nproc_per_node", "2", "-m", "training.scripts.train"]
    res = subprocess.run(
        [*cmd, *COMMON, f"data.roots=[{toy}]", "batch_size=7", f"out={tmp_path / 'odd'}"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode != 0 and "batch_size=7 is the global batch" in res.stderr


def test_fsdp_shards_the_policy_and_takes_the_one_process_steps_and_resumes_at_another_size(toy, tmp_path):
    """``fsdp=true``: the policy's layers sharded across two processes (AWBC: the critic whole on each), the
    same losses and weights as one process; its whole-tensor checkpoint resumes on one process."""
    args = [*COMMON, f"data.roots=[{toy}]", "steps=6", "save_every=3", "algo=awbc"]
    args += ["algo.critic.steps=20", "algo.critic.batch_size=16"]
    one, split = tmp_path / "one", tmp_path / "split"
    _run([*args, f"out={one}"], tmp_path)
    out = _run([*args, f"out={split}", "fsdp=true", "stop_after=3"], tmp_path, ranks=2)
    assert "fsdp: the policy sharded across 2 processes" in out
    half = _weights(split)
    assert set(half) == set(_weights(one))  # whole tensors under the model's own names: a deployable model
    _run([*args, f"out={split}", "fsdp=true"], tmp_path)  # resumed by one process (fsdp: nothing to shard)
    assert _losses(split) == pytest.approx(_losses(one), rel=1e-4, abs=1e-5)
    assert _losses(split, "grad_norm") == pytest.approx(_losses(one, "grad_norm"), rel=1e-3)  # clipped alike
    _same_weights(_weights(one), _weights(split))


def test_fsdp_trains_the_smolvla_adapter_as_one_process_does(toy, tmp_path):
    """A LeRobot adapter (SmolVLA on a tiny backbone) sharded across two processes: the one-process steps."""
    from policies.smolvla.tiny import build_tiny_smolvlm

    vlm = build_tiny_smolvlm(tmp_path / "vlm")
    args = [*COMMON, f"data.roots=[{toy}]", "steps=4", "policy=smolvla", f"policy.vlm_model_name={vlm}"]
    args += ["policy.image_size=[32,32]", "policy.chunk_size=8", "policy.num_steps=2", "env.runner=null"]
    one, two = tmp_path / "one", tmp_path / "two"
    _run([*args, f"out={one}"], tmp_path)
    assert "fsdp: the policy sharded across 2 processes" in _run(
        [*args, f"out={two}", "fsdp=true"], tmp_path, 2
    )
    assert _losses(two) == pytest.approx(_losses(one), rel=1e-4, abs=1e-5)
    assert _losses(two, "grad_norm") == pytest.approx(_losses(one, "grad_norm"), rel=1e-3)
    _same_weights(_weights(one), _weights(two))


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["recap", "aloe", "habc", "apo", "flow_dpo"])
def test_fsdp_takes_the_data_parallel_steps_for_every_algorithm(toy, tmp_path, algo):
    """FSDP against one process; APO against two data-parallel processes (its reference point pairs frames
    within a process's rows: docs/scale.md)."""
    args = [*COMMON, f"data.roots=[{toy}]", "steps=3", f"algo={algo}"]
    args += [] if algo == "apo" else ["algo.critic.steps=10", "algo.critic.batch_size=16"]
    ref, two = tmp_path / "ref", tmp_path / "two"
    _run([*args, f"out={ref}"], tmp_path, ranks=2 if algo == "apo" else 1)
    _run([*args, f"out={two}", "fsdp=true"], tmp_path, ranks=2)
    assert _losses(two) == pytest.approx(_losses(ref), rel=1e-4, abs=1e-5)
    assert _losses(two, "grad_norm") == pytest.approx(_losses(ref, "grad_norm"), rel=1e-3)
