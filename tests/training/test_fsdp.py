"""Sharded training (``fsdp=true``, FSDP2) under `torchrun`: the policy's weights, gradients and moments
split across two gloo processes take the steps one process takes (or, for APO, two data-parallel ones), and
their whole-tensor checkpoint resumes on one process."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from launched import COMMON, losses, run, same_weights, weights
from toy_episodes import write_toy_episodes


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy_episodes(tmp_path_factory.mktemp("fsdp") / "toy", n=8)


def test_fsdp_shards_the_policy_and_takes_the_one_process_steps_and_resumes_at_another_size(toy, tmp_path):
    """``fsdp=true``: the policy's layers sharded across two processes (AWBC: the critic whole on each), the
    same losses and weights as one process; its whole-tensor checkpoint resumes on one process."""
    args = [*COMMON, f"data.roots=[{toy}]", "steps=6", "save_every=3", "algo=awbc"]
    args += ["algo.critic.steps=20", "algo.critic.batch_size=16"]
    one, split = tmp_path / "one", tmp_path / "split"
    run([*args, f"out={one}"], tmp_path)
    out = run([*args, f"out={split}", "fsdp=true", "stop_after=3"], tmp_path, ranks=2)
    assert "fsdp: the policy sharded across 2 processes" in out
    half = weights(split)
    assert set(half) == set(weights(one))  # whole tensors under the model's own names: a deployable model
    run([*args, f"out={split}", "fsdp=true"], tmp_path)  # resumed by one process (fsdp: nothing to shard)
    assert losses(split) == pytest.approx(losses(one), rel=1e-4, abs=1e-5)
    assert losses(split, "grad_norm") == pytest.approx(losses(one, "grad_norm"), rel=1e-3)  # clipped alike
    same_weights(weights(one), weights(split))


@pytest.mark.slow
def test_fsdp_trains_the_smolvla_adapter_as_one_process_does(toy, tmp_path):
    """A LeRobot adapter (SmolVLA on a tiny backbone) sharded across two processes: the one-process steps."""
    from policies.smolvla.tiny import build_tiny_smolvlm

    vlm = build_tiny_smolvlm(tmp_path / "vlm")
    args = [*COMMON, f"data.roots=[{toy}]", "steps=4", "policy=smolvla", f"policy.vlm_model_name={vlm}"]
    args += ["policy.image_size=[32,32]", "policy.chunk_size=8", "policy.num_steps=2", "env.runner=null"]
    one, two = tmp_path / "one", tmp_path / "two"
    run([*args, f"out={one}"], tmp_path)
    assert "fsdp: the policy sharded across 2 processes" in run(
        [*args, f"out={two}", "fsdp=true"], tmp_path, 2
    )
    assert losses(two) == pytest.approx(losses(one), rel=1e-4, abs=1e-5)
    assert losses(two, "grad_norm") == pytest.approx(losses(one, "grad_norm"), rel=1e-3)
    same_weights(weights(one), weights(two))


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["recap", "aloe", "habc", "apo", "flow_dpo"])
def test_fsdp_takes_the_data_parallel_steps_for_every_algorithm(toy, tmp_path, algo):
    """FSDP against one process; APO against two data-parallel processes (its reference point pairs frames
    within a process's rows: docs/scale.md)."""
    args = [*COMMON, f"data.roots=[{toy}]", "steps=3", f"algo={algo}"]
    args += [] if algo == "apo" else ["algo.critic.steps=10", "algo.critic.batch_size=16"]
    ref, two = tmp_path / "ref", tmp_path / "two"
    run([*args, f"out={ref}"], tmp_path, ranks=2 if algo == "apo" else 1)
    run([*args, f"out={two}", "fsdp=true"], tmp_path, ranks=2)
    assert losses(two) == pytest.approx(losses(ref), rel=1e-4, abs=1e-5)
    assert losses(two, "grad_norm") == pytest.approx(losses(ref, "grad_norm"), rel=1e-3)
