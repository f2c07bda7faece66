"""PolicyRunner: env observation -> [H, A] numpy chunk, seeded noise, pass-through of sampling options."""

import numpy as np
import pytest
import torch
from dummy_policy import HomePolicy

from vla.runtime import ChunkExecutor, PolicyRunner

POSE = [0.0, 0.1, 0.0, -2.2, 0.0, 2.3, 0.785, 0.04]


def _obs(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "agentview": rng.integers(0, 256, (8, 8, 3), dtype=np.uint8),
        "wrist": rng.integers(0, 256, (8, 8, 3), dtype=np.uint8),
        "state": rng.normal(size=8).astype(np.float32),
        "instruction": "reach the red ball",
    }


def test_seeded_noise_is_reproducible():
    runner = PolicyRunner(HomePolicy(POSE, chunk_size=6, noise_std=0.1), cameras=["agentview"], seed=3)
    a = runner(_obs())
    assert a.shape == (6, 8) and a.dtype == np.float32
    runner.reseed(3)
    np.testing.assert_array_equal(runner(_obs()), a)
    runner.reseed(4)
    assert not np.allclose(runner(_obs()), a)


def test_passes_options_and_runs_without_grad():
    policy = HomePolicy(POSE, chunk_size=4)
    policy.train()
    runner = PolicyRunner(policy, cameras=["agentview", "wrist"], cond=1, guidance=1.5, num_steps=3, seed=0)
    assert not policy.training  # eval mode
    np.testing.assert_allclose(runner(_obs()), np.tile(POSE, (4, 1)), rtol=1e-6)
    kw = policy.last_kwargs
    assert kw["cond"].dtype == torch.long and kw["cond"].tolist() == [1]
    assert (kw["guidance"], kw["num_steps"], kw["generator"]) == (1.5, 3, runner.generator)
    assert kw["inference_mode"]
    assert (runner.chunk_size, runner.action_dim) == (4, 8)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="cond=2"):
        PolicyRunner(HomePolicy(POSE), cameras=[], cond=2)
    runner = PolicyRunner(HomePolicy(POSE), cameras=["front"])
    with pytest.raises(KeyError, match=r"no camera \['front'\]"):
        runner(_obs())


def test_runner_drives_an_executor():
    runner = PolicyRunner(HomePolicy(POSE, chunk_size=5), cameras=["wrist"], seed=0)
    ex = ChunkExecutor(runner, horizon=2, chunk_size=runner.chunk_size)
    actions = [ex.act(_obs(t)) for t in range(5)]
    np.testing.assert_allclose(actions, np.tile(POSE, (5, 1)), rtol=1e-6)
    assert ex.policy_calls == 3 and runner.policy.calls == 3
