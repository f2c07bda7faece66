"""ChunkExecutor: h-of-H execution order, call counts, reset, temporal ensembling, bad chunks."""

import math
import subprocess
import sys

import numpy as np
import pytest

from vla.runtime import ChunkExecutor, NonFiniteChunkError


class CountingSampler:
    """chunk[j] = [call, j]: every action says which call produced it and where it sat in the chunk."""

    def __init__(self, chunk_size: int) -> None:
        self.chunk_size = chunk_size
        self.calls = 0
        self.seen: list = []

    def __call__(self, obs) -> np.ndarray:  # [H, 2]
        self.seen.append(obs)
        chunk = np.stack([np.full(self.chunk_size, self.calls), np.arange(self.chunk_size)], 1)
        self.calls += 1
        return chunk.astype(np.float32)


def _run(ex: ChunkExecutor, n: int) -> list[tuple[int, int]]:
    return [tuple(int(v) for v in ex.act(obs=t)) for t in range(n)]


def test_executes_first_h_of_each_chunk_in_order():
    fn = CountingSampler(4)
    ex = ChunkExecutor(fn, horizon=3, chunk_size=4)
    assert _run(ex, 7) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 0)]
    assert (ex.policy_calls, ex.steps) == (3, 7) == (math.ceil(7 / 3), 7)
    assert fn.seen == [0, 3, 6]  # sampled from the observation of the step that needed a chunk
    assert ex.steps_to_replan == 2
    np.testing.assert_array_equal(ex.remaining, [[2, 1], [2, 2], [2, 3]])  # the unexecuted tail


@pytest.mark.parametrize("h", [1, 5])
def test_call_count_is_ceil_steps_over_h(h):
    ex = ChunkExecutor(CountingSampler(5), horizon=h, chunk_size=5)
    actions = _run(ex, 13)
    assert ex.policy_calls == math.ceil(13 / h)
    assert [j for _, j in actions] == [t % h for t in range(13)]


def test_reset_starts_a_new_chunk_and_zeroes_counters():
    fn = CountingSampler(4)
    ex = ChunkExecutor(fn, horizon=4, chunk_size=4)
    _run(ex, 2)
    ex.reset()
    assert (ex.policy_calls, ex.steps, ex.remaining, ex.last_chunk) == (0, 0, None, None)
    assert _run(ex, 1) == [(1, 0)]  # a fresh chunk, not the rest of the old one
    assert ex.policy_calls == 1 and fn.calls == 2


def test_horizon_change_applies_from_the_next_chunk():
    """Execution-horizon upcycling will set ``horizon`` between chunks."""
    ex = ChunkExecutor(CountingSampler(6), horizon=2, chunk_size=6)
    first = _run(ex, 1)
    ex.horizon = 4
    assert first + _run(ex, 5) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (1, 3)]


def test_temporal_ensembling_matches_hand_computed_weights():
    """H=3, m=ln 2: weights 1, 1/2, 1/4 from the oldest prediction; chunk c predicts 10c + j at t = c + j."""

    def fn(obs):
        return (10.0 * obs + np.arange(3.0))[:, None]  # [3, 1]; obs = the step = the call index

    ex = ChunkExecutor(fn, horizon=1, chunk_size=3, temporal_ensemble=math.log(2))
    out = [float(ex.act(t)[0]) for t in range(4)]
    expected = [
        0.0,  # chunk 0 only
        (1 * 1 + 0.5 * 10) / 1.5,  # = 4
        (1 * 2 + 0.5 * 11 + 0.25 * 20) / 1.75,  # = 7.142857
        (1 * 12 + 0.5 * 21 + 0.25 * 30) / 1.75,  # chunk 0 no longer covers t=3: = 17.142857
    ]
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert ex.policy_calls == ex.steps == 4


def test_temporal_ensembling_with_m_zero_is_the_mean():
    ex = ChunkExecutor(
        lambda t: (10.0 * t + np.arange(4.0))[:, None], horizon=1, chunk_size=4, temporal_ensemble=0
    )
    out = [float(ex.act(t)[0]) for t in range(3)]
    np.testing.assert_allclose(out, [0.0, (1 + 10) / 2, (2 + 11 + 20) / 3])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"horizon": 0, "chunk_size": 4}, r"horizon h=0 must be in \[1, chunk_size H=4\]"),
        ({"horizon": 5, "chunk_size": 4}, r"horizon h=5"),
        ({"horizon": 1, "chunk_size": 0}, r"chunk_size H=0"),
        ({"horizon": 2, "chunk_size": 4, "temporal_ensemble": 0.01}, "horizon must be 1"),
        ({"horizon": 1, "chunk_size": 4, "temporal_ensemble": float("nan")}, "finite"),
    ],
)
def test_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ChunkExecutor(CountingSampler(4), **kwargs)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_chunk_raises_a_clear_error(bad):
    fn = CountingSampler(4)

    def sample(obs):
        chunk = fn(obs)
        if fn.calls == 2:
            chunk[3, 1] = bad
        return chunk

    ex = ChunkExecutor(sample, horizon=2, chunk_size=4)
    _run(ex, 2)
    with pytest.raises(
        NonFiniteChunkError, match=r"policy call 2 \(control step 2\).*chunk step 3, action dim 1"
    ):
        ex.act(2)
    assert isinstance(NonFiniteChunkError("x"), ValueError)


def test_wrong_chunk_shape_is_rejected():
    ex = ChunkExecutor(lambda obs: np.zeros((1, 4, 2)), horizon=2, chunk_size=4)
    with pytest.raises(ValueError, match=r"shape \(1, 4, 2\); expected \[H=4, A\]"):
        ex.act(0)


def test_the_executor_imports_neither_torch_nor_mujoco():
    code = "import sys, vla.runtime.executor; print('torch' in sys.modules, 'mujoco' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
