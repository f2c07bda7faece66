"""Episodes in parallel worker processes, each holding one deployment (env + policy) across its episodes.

Workers are spawned, not forked (GL contexts and torch thread pools do not survive fork); they inherit the
``MUJOCO_GL`` that ``import sim`` chose through the environment, and run torch on one thread.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

_WORKER_ARGS: tuple[type, Any] | None = None
_PARENT_GL: str | None = None
_WORKER: Any = None


def _init_worker(runner_cls: type, cfg: Any, mujoco_gl: str | None) -> None:
    """Pool initializer: cheap and cannot fail (heavy set-up errors surface from the first episode)."""
    global _WORKER_ARGS, _PARENT_GL
    import torch

    torch.set_num_threads(1)
    _WORKER_ARGS, _PARENT_GL = (runner_cls, cfg), mujoco_gl


def _worker_episode(index: int) -> Any:
    global _WORKER
    if _WORKER is None:
        assert _WORKER_ARGS is not None
        if os.environ.get("MUJOCO_GL") != _PARENT_GL:  # sim's probe result reaches workers via the env
            raise RuntimeError(
                f"worker has MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}, the parent {_PARENT_GL!r}"
            )
        runner_cls, cfg = _WORKER_ARGS
        _WORKER = runner_cls(cfg)
    return _WORKER.run(index)


def run_episodes(runner_cls: type, cfg: Any, episodes: int, workers: int) -> Iterator[Any]:
    """``runner_cls(cfg).run(i)`` for i in range(episodes), in ``workers`` spawned processes (0: here).

    Results come in completion order. Each worker builds one runner (env + policy) and reuses it.
    """
    if not workers:
        runner = runner_cls(cfg)
        try:
            for i in range(episodes):
                yield runner.run(i)
        finally:
            runner.close()
        return
    ctx = mp.get_context("spawn")
    pool = ProcessPoolExecutor(
        workers,
        mp_context=ctx,
        initializer=_init_worker,
        initargs=(runner_cls, cfg, os.environ.get("MUJOCO_GL")),
    )
    try:
        futures = [pool.submit(_worker_episode, i) for i in range(episodes)]  # first episodes first
        for fut in as_completed(futures):
            yield fut.result()  # a worker's exception is re-raised here, with its traceback as the cause
    except BrokenProcessPool as exc:
        raise RuntimeError(
            "an episode worker process died (killed for memory? a crash in MuJoCo/GL or torch?)"
        ) from exc
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
