"""``ChunkExecutor``: turns a policy's action chunks into one action per control step.

This is the robot-side half of the runtime (openpi's ``ActionChunkBroker``): it holds no model and
imports neither torch nor a simulator. It reaches the policy only through a :data:`SampleFn`
(observation -> chunk ``[H, A]``): a local :class:`~vla.runtime.runner.PolicyRunner` today, a client of
a remote inference server later.

One ``act`` call is four steps, each a method that the deployment features plug into:

- **schedule** (:meth:`ChunkExecutor._needs_chunk`): whether this step starts a new chunk. Execution-horizon
  upcycling changes :attr:`ChunkExecutor.horizon` between chunks; it is read when a chunk starts.
- **source** (:meth:`ChunkExecutor._sample`): the one place a chunk enters. Async inference turns the
  blocking call into a request that runs while the current chunk executes; real-time chunking passes
  :attr:`ChunkExecutor.remaining` (the actions already committed) as the prefix to inpaint.
- **check** (:meth:`ChunkExecutor._check`): a chunk with NaN/inf raises :class:`NonFiniteChunkError`;
  the safety layer will catch it and hold.
- **emit** (:meth:`ChunkExecutor._next_action`): the action handed to the robot; the safety layer's
  limits (joint ranges, velocity, workspace) wrap this.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

SampleFn = Callable[[Any], np.ndarray]
"""observation -> action chunk ``[H, A]`` in raw units (what the robot executes)."""


class NonFiniteChunkError(ValueError):
    """A sampled chunk contained NaN or inf. Later the safety layer turns this into a hold."""


class ChunkExecutor:
    """Executes the first ``horizon`` actions of each chunk, or ACT-style temporal ensembling.

    Without ensembling, a chunk is sampled at the first step and whenever ``horizon`` actions of the
    current one have run (receding horizon): calls per episode = ceil(steps / h).

    With ``temporal_ensemble=m``, a chunk is sampled at every step (so ``horizon`` must be 1) and the
    action for step t averages every stored chunk's prediction for t (chunk planned at step s
    predicts ``chunk[t - s]`` for ``t - s < H``) with weights ``exp(-m * i)``, i = 0 for the oldest
    prediction (ACT, Zhao et al. 2023; m = 0.01 there). m > 0 favours older predictions (smoother),
    m < 0 newer ones (more reactive), m = 0 is a plain mean.

    Args:
        sample_fn: Observation -> chunk ``[H, A]``.
        horizon: h, actions executed per chunk, in [1, H].
        chunk_size: H, the length of every chunk ``sample_fn`` returns.
        temporal_ensemble: m, or None for plain receding-horizon execution.

    Example:
        >>> ex = ChunkExecutor(runner, horizon=5, chunk_size=10)
        >>> ex.reset(); action = ex.act(obs)  # [A]
    """

    def __init__(
        self,
        sample_fn: SampleFn,
        *,
        horizon: int,
        chunk_size: int,
        temporal_ensemble: float | None = None,
        upcycle: Callable[[np.ndarray, int, np.ndarray | None], int] | None = None,
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size H={chunk_size} must be >= 1")
        if not 1 <= horizon <= chunk_size:
            raise ValueError(f"horizon h={horizon} must be in [1, chunk_size H={chunk_size}]")
        if temporal_ensemble is not None:
            if not math.isfinite(temporal_ensemble):
                raise ValueError(f"temporal_ensemble={temporal_ensemble} must be a finite float")
            if horizon != 1:
                raise ValueError(
                    f"temporal ensembling samples a chunk every step: horizon must be 1, not {horizon}"
                )
        self.sample_fn = sample_fn
        self.horizon = horizon
        self.chunk_size = chunk_size
        self.temporal_ensemble = temporal_ensemble
        # (chunk, h0, previous tail) -> h*: execution-horizon upcycling (vla.runtime.upcycling)
        self.upcycle = upcycle
        self.reset()

    def reset(self) -> None:
        """Forget every chunk and zero the counters (call at each episode start)."""
        self.steps = 0  # actions emitted since reset
        self.chunk_started = False  # the last action was the first of a freshly started chunk
        self.policy_calls = 0  # chunks sampled since reset
        self.last_chunk: np.ndarray | None = None  # [H, A], the latest chunk sampled (for logging)
        self._chunk: np.ndarray | None = None  # [H, A], the chunk being executed
        self._index = 0  # next action of _chunk
        self._end = 0  # _chunk runs until this index (its horizon when it was sampled)
        self.horizons: list[int] = []  # executed horizon of each chunk (with upcycling)
        self._plans: deque[tuple[int, np.ndarray]] = (
            deque()
        )  # temporal ensembling: (step, chunk), oldest first

    # ---- state for the later features (RTC prefix, async request timing) ---------------------------
    @property
    def remaining(self) -> np.ndarray | None:
        """The not yet executed tail of the current chunk, ``[H - i, A]`` (None before the first chunk)."""
        return None if self._chunk is None else self._chunk[self._index :]

    @property
    def steps_to_replan(self) -> int:
        """Actions left before the next chunk is sampled (0: the next ``act`` samples one)."""
        if self.temporal_ensemble is not None or self._chunk is None:
            return 0
        return self._end - self._index

    # ---- one control step ---------------------------------------------------------------------------
    def act(self, obs: Any) -> np.ndarray:  # [A]
        """The action for this control step; samples a new chunk from ``obs`` when one is due."""
        self.chunk_started = False
        if self.temporal_ensemble is not None:
            self.chunk_started = self.steps == 0  # the ensemble blends chunks: one continuous stream
            action = self._ensembled(obs)
        else:
            if self._needs_chunk():
                self.chunk_started = True
                previous = self.remaining  # what the old chunk planned for the coming steps (discarded)
                self._chunk, self._index = self._sample(obs), 0
                self._end = self.horizon if self.upcycle is None else self._upcycled(self._chunk, previous)
            action = self._next_action()
        self.steps += 1
        return action

    def _upcycled(self, chunk: np.ndarray, previous: np.ndarray | None = None) -> int:
        """h* for ``chunk``; ``previous`` is the old chunk's discarded tail aligned with it (or None)."""
        assert self.upcycle is not None
        h = int(self.upcycle(chunk, self.horizon, previous))
        if not self.horizon <= h <= self.chunk_size:
            raise ValueError(f"upcycled horizon {h} outside [h0={self.horizon}, H={self.chunk_size}]")
        self.horizons.append(h)
        return h

    def _needs_chunk(self) -> bool:
        return self._chunk is None or self._index >= self._end

    def _next_action(self) -> np.ndarray:  # [A]
        assert self._chunk is not None
        action = self._chunk[self._index].copy()
        self._index += 1
        return action

    def _ensembled(self, obs: Any) -> np.ndarray:  # [A]
        assert self.temporal_ensemble is not None
        t = self.steps
        self._plans.append((t, self._sample(obs)))
        while t - self._plans[0][0] >= self.chunk_size:  # chunks that no longer cover step t
            self._plans.popleft()
        preds = np.stack([chunk[t - s] for s, chunk in self._plans]).astype(
            np.float64
        )  # [K, A], oldest first
        w = np.exp(-self.temporal_ensemble * np.arange(len(preds)))  # [K]
        return ((w[:, None] * preds).sum(0) / w.sum()).astype(self._plans[-1][1].dtype)

    def _sample(self, obs: Any) -> np.ndarray:  # [H, A]
        chunk = np.array(self.sample_fn(obs))  # a copy: the caller may reuse its buffer
        self.policy_calls += 1
        self._check(chunk)
        self.last_chunk = chunk
        return chunk

    def _check(self, chunk: np.ndarray) -> None:
        if chunk.ndim != 2 or chunk.shape[0] != self.chunk_size:
            raise ValueError(
                f"sample_fn returned a chunk of shape {chunk.shape}; expected [H={self.chunk_size}, A]"
            )
        bad = ~np.isfinite(chunk)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise NonFiniteChunkError(
                f"policy call {self.policy_calls} (control step {self.steps}) returned a chunk with "
                f"{int(bad.sum())} non-finite value(s), first at chunk step {i}, action dim {j} "
                f"({chunk[i, j]})"
            )
