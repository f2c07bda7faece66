"""Episodes in parallel workers, each holding one deployment (env + policy) across its episodes.

Two runners (``runner=`` of ``vla-eval`` and ``vla-rollout``), the same episodes for the same seeds
(episode i always runs with seed ``seed + i``, whichever worker plays it):

- ``process`` (default): spawned processes of this machine (not forked: GL contexts and torch thread
  pools do not survive fork). A worker that dies stops the run.
- ``ray``: Ray actors on a local or remote cluster (``ray.address=``; the ``ray`` extra). An actor that
  dies mid-episode is replaced and its episode rerun, so every episode is returned exactly once.

Workers inherit the ``MUJOCO_GL`` that ``import sim`` chose, and run torch on one thread. Results come back
to this process as episodes finish, where one writer takes them (``vla-rollout``).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import warnings
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

RUNNERS = ("process", "ray")


@dataclass
class RayConfig:
    """``runner=ray``: where the actors run."""

    address: str | None = None  # a running cluster (``ray://host:10001`` or ``auto``); None: start one here
    retries: int = 3  # reruns of one episode whose actor died, before the run stops


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


def run_episodes(
    runner_cls: type,
    cfg: Any,
    episodes: int,
    workers: int,
    runner: str = "process",
    ray: RayConfig | None = None,
) -> Iterator[Any]:
    """``runner_cls(cfg).run(i)`` for i in range(episodes), in ``workers`` workers of ``runner`` (0: here).

    Results come in completion order. Each worker builds one runner (env + policy) and reuses it.
    """
    if runner not in RUNNERS:
        raise ValueError(f"runner={runner!r}: use one of {', '.join(RUNNERS)}")
    if runner == "ray" and workers:
        yield from _ray_episodes(runner_cls, cfg, episodes, workers, ray or RayConfig())
        return
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


# ---- Ray -------------------------------------------------------------------------------------------------
class _EpisodeActor:
    """One Ray actor: one deployment, reused across the episodes it is given."""

    def __init__(self, runner_cls: type, cfg: Any) -> None:
        import torch

        torch.set_num_threads(1)
        self.runner = runner_cls(cfg)

    def run(self, index: int) -> Any:
        return self.runner.run(index)


def _ray_episodes(runner_cls: type, cfg: Any, episodes: int, workers: int, rc: RayConfig) -> Iterator[Any]:
    try:
        import ray
        from ray.exceptions import ActorDiedError, ActorUnavailableError, WorkerCrashedError
    except ImportError as exc:
        raise ImportError("runner=ray needs Ray: pip install -e '.[ray]'") from exc
    started = not ray.is_initialized()
    if started:
        ray.init(
            address=rc.address,
            num_cpus=None if rc.address else workers,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    env = {"OMP_NUM_THREADS": "1"}
    if rc.address is None:  # a cluster of this machine: the actors see our MUJOCO_GL and import path
        env["MUJOCO_GL"] = os.environ.get("MUJOCO_GL", "")
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    actor_cls = ray.remote(num_cpus=1, max_restarts=0)(_EpisodeActor)

    def new_actor() -> Any:
        return actor_cls.options(runtime_env={"env_vars": env}).remote(runner_cls, cfg)

    actors = [new_actor() for _ in range(min(workers, episodes))]
    todo, running, died = deque(range(episodes)), {}, dict.fromkeys(range(episodes), 0)

    def give(slot: int) -> None:
        if todo:
            i = todo.popleft()
            running[actors[slot].run.remote(i)] = (slot, i)

    try:
        for slot in range(len(actors)):
            give(slot)
        while running:
            (ref,), _ = ray.wait(list(running), num_returns=1)
            slot, i = running.pop(ref)
            try:
                result = ray.get(ref)
            except (ActorDiedError, ActorUnavailableError, WorkerCrashedError) as exc:
                died[i] += 1
                if died[i] > rc.retries:
                    raise RuntimeError(f"episode {i}: its Ray worker died {died[i]} times ({exc})") from exc
                warnings.warn(f"episode {i}: its Ray worker died; rerunning it on a new one", stacklevel=2)
                ray.kill(actors[slot])
                actors[slot] = new_actor()
                todo.appendleft(i)  # rerun first; the dead attempt returned nothing, so nothing counts twice
            else:
                yield result
            give(slot)
    finally:
        for actor in actors:
            ray.kill(actor)
        if started:
            ray.shutdown()
