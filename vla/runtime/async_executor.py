"""Asynchronous chunk execution: inference runs in a background worker while the control loop keeps
executing the current chunk at its fixed rate.

A request for the next chunk goes out when ``steps_to_replan <= d`` (d = the inference delay in control
steps: measured from the worker's latencies, or fixed with ``simulated_delay`` to reproduce a real
robot's timing in simulation, where the env waits for nobody). The request carries the observation and,
with ``rtc=True``, the not yet executed actions of the current chunk as the prefix to inpaint. When the
chunk arrives e steps after its request it is spliced in at index e -- the actions for the time that has
already passed are skipped -- so the executed trajectory stays time-aligned -- and runs h actions from
there, so a chunk is requested every h steps, as in synchronous execution (h + d <= H avoids starving).
If the current chunk runs out first, the last action is held (``starved`` counts those steps). A worker
exception is re-raised from :meth:`act` (the safety layer turns it into a hold).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from vla.runtime.executor import ChunkExecutor, SampleFn


class AsyncChunkExecutor(ChunkExecutor):
    """See the module docstring. ``sample_fn(obs)`` or, with ``rtc``, ``sample_fn(obs, prefix, delay)``."""

    def __init__(
        self,
        sample_fn: SampleFn,
        *,
        horizon: int,
        chunk_size: int,
        dt: float,
        simulated_delay: int | None = None,
        rtc: bool = False,
        rtc_soft_steps: int | None = None,
        upcycle=None,
    ) -> None:
        if simulated_delay is not None and not 0 <= simulated_delay < chunk_size:
            raise ValueError(f"simulated_delay={simulated_delay} must be in [0, H={chunk_size})")
        self.dt = dt
        self.simulated_delay = simulated_delay
        self.rtc = rtc
        # RTC: the new chunk is guided toward the d committed actions (frozen) and this many more of the old
        # chunk's tail, with decaying weight (None: the whole tail)
        self.rtc_soft_steps = rtc_soft_steps
        self._pool = (
            ThreadPoolExecutor(1, thread_name_prefix="inference") if simulated_delay is None else None
        )
        super().__init__(sample_fn, horizon=horizon, chunk_size=chunk_size, upcycle=upcycle)

    def reset(self) -> None:
        super().reset()
        self._future: Future | None = None
        self._sim_result: tuple[np.ndarray, int] | None = None  # (chunk, step it becomes available)
        self._req_step = 0
        self.delay_steps = self.simulated_delay if self.simulated_delay is not None else 1
        self.latencies: list[float] = []
        self.starved = 0
        self.splice_offsets: list[int] = []

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    # ---- one control step -----------------------------------------------------------------------------
    def act(self, obs: Any) -> np.ndarray:  # [A]
        self.chunk_started = False
        if self._chunk is None:  # the first chunk of an episode: nothing to execute meanwhile
            chunk, latency = self._call_now(obs)
            self.latencies.append(latency)
            self.policy_calls += 1
            self._check(chunk)
            self.last_chunk = chunk
            self._start(chunk, 0)
        else:
            self._splice_if_ready()
            if self._future is None and self._sim_result is None and self.steps_to_replan <= self.delay_steps:
                self._request(obs)
                self._splice_if_ready()
        assert self._chunk is not None
        if self._index >= len(self._chunk):  # starved: hold the last action until the chunk arrives
            self.starved += 1
            action = self._chunk[-1].copy()
        else:
            action = self._next_action()
        self.steps += 1
        return action

    @property
    def steps_to_replan(self) -> int:
        if self._chunk is None:
            return 0
        return max(0, self._end - self._index)

    # ---- requests -------------------------------------------------------------------------------------
    def _call(self, obs: Any, prefix: np.ndarray | None, delay: int) -> tuple[np.ndarray, float]:
        t0 = time.perf_counter()
        chunk = self.sample_fn(obs, prefix, delay) if self.rtc else self.sample_fn(obs)  # type: ignore[call-arg]
        return np.array(chunk), time.perf_counter() - t0

    def _call_now(self, obs: Any) -> tuple[np.ndarray, float]:
        """A blocking call. With a worker it runs there too, after any request still in flight from before
        a reset (its chunk is dropped): one caller at a time, as a policy server or a pipe needs."""
        if self._pool is None:
            return self._call(obs, None, 0)
        return self._pool.submit(self._call, obs, None, 0).result()

    def _request(self, obs: Any) -> None:
        prefix = self.remaining.copy() if (self.rtc and self.remaining is not None) else None
        if prefix is not None and self.rtc_soft_steps is not None:
            prefix = prefix[: self.delay_steps + self.rtc_soft_steps]
        self._req_step = self.steps
        if self.simulated_delay is not None:
            chunk, latency = self._call(obs, prefix, self.delay_steps)
            self._sim_result = (chunk, self.steps + self.simulated_delay)
            self.latencies.append(latency)
        else:
            assert self._pool is not None
            self._future = self._pool.submit(self._call, obs, prefix, self.delay_steps)

    def _splice_if_ready(self) -> None:
        chunk = None
        if self._sim_result is not None and self.steps >= self._sim_result[1]:
            chunk, self._sim_result = self._sim_result[0], None
        elif self._future is not None and self._future.done():
            future, self._future = self._future, None
            chunk, latency = future.result()  # re-raises a worker's exception here
            self.latencies.append(latency)
            self.delay_steps = max(1, math.ceil(float(np.median(self.latencies[-20:])) / self.dt))
        if chunk is None:
            return
        self.policy_calls += 1
        self._check(chunk)
        self.last_chunk = chunk
        elapsed = self.steps - self._req_step
        self.splice_offsets.append(elapsed)
        self._start(chunk, elapsed)

    def _start(self, chunk: np.ndarray, offset: int) -> None:
        """Execute ``chunk`` from index ``offset`` (the steps its inference took) for h actions, so one
        chunk is requested every h steps as in synchronous execution. Upcycling sees the chunk from the
        splice point on (its velocity changes and its bound H - d counted from there) and, for the replan
        gate, the old chunk's not yet executed tail, which is planned for the same steps."""
        previous = self.remaining  # None for an episode's first chunk
        index = min(offset, self.chunk_size - 1)
        h = self.horizon if self.upcycle is None else self._upcycled(chunk[index:], previous)
        self._chunk, self._index = chunk, index
        self._end = min(self.chunk_size, index + h)
        self.chunk_started = True
