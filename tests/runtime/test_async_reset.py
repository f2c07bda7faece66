"""A reset while a background request is in flight: the next episode's first chunk waits for it, so the
policy (a server, a pipe to an inference process) is never called from two threads at once."""

import threading
import time

import numpy as np

from vla.runtime.async_executor import AsyncChunkExecutor


def test_the_first_chunk_after_a_reset_runs_after_the_request_in_flight():
    lock, active, overlap, calls = threading.Lock(), [0], [0], [0]

    def sample(obs):  # [H, A]
        with lock:
            active[0] += 1
            calls[0] += 1
            overlap[0] = max(overlap[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return np.full((10, 2), float(obs))

    ex = AsyncChunkExecutor(sample, horizon=2, chunk_size=10, dt=0.01)
    try:
        ex.reset()
        ex.act(1)  # the first chunk, blocking
        ex.act(1)  # one step before the replan: the next request goes out in the background
        deadline = time.perf_counter() + 1.0
        while calls[0] < 2 and time.perf_counter() < deadline:  # it has started
            time.sleep(0.001)
        assert calls[0] == 2
        ex.reset()  # a new episode while that request runs
        action = ex.act(2)
        assert calls[0] == 3 and overlap[0] == 1  # one call at a time
        assert np.all(action == 2.0)  # the new episode's chunk, not the dropped one
    finally:
        ex.close()
