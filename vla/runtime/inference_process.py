"""Policy inference in its own process: the control loop's process never runs the model.

:class:`InferenceProcess` is a :data:`~vla.runtime.executor.SampleFn` (observation -> chunk ``[H, A]``)
whose model lives in a spawned worker process that owns its own CPU core (``cpu=``) and torch threads,
as a robot deployment runs it: inference load and the Python GIL never stall the control loop. The two
talk over a pipe (the observation's images and state out, the chunk back); a request blocks the calling
thread only (the :class:`~vla.runtime.async_executor.AsyncChunkExecutor` calls it from its background
thread). If the worker dies or raises, the call raises, and the safety layer turns that into a hold.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import time
import traceback
from collections.abc import Sequence
from typing import Any

import numpy as np


def _serve(conn: Any, checkpoint: str, spec: dict) -> None:
    """The worker: load the policy, then answer ``("sample", obs, prefix, delay)`` until ``("close",)``."""
    try:
        if spec.get("cpu") is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {int(spec["cpu"])})
        import torch

        torch.set_num_threads(int(spec["threads"]))
        from vla.policy import import_policy_modules, load_policy

        import_policy_modules(spec["imports"])
        from vla.runtime.runner import PolicyRunner

        policy = load_policy(checkpoint, spec["device"])
        cameras = spec["cameras"] or list(getattr(getattr(policy, "config", None), "cameras", []) or [])
        runner = PolicyRunner(
            policy,
            cameras=cameras,
            device=spec["device"],
            seed=spec["seed"],
            rtc_beta_max=spec["rtc_beta_max"],
            cond=spec["cond"],
            guidance=spec["guidance"],
            num_steps=spec["num_steps"],
        )
        conn.send(
            ("ready", {"chunk_size": runner.chunk_size, "action_dim": runner.action_dim, "cameras": cameras})
        )
    except Exception:
        conn.send(("error", traceback.format_exc(limit=3)))
        return
    while True:
        msg = conn.recv()
        if msg[0] == "close":
            return
        try:
            if msg[0] == "reseed":
                runner.reseed(msg[1])
                conn.send(("ok", None, 0.0))
                continue
            _, obs, prefix, delay = msg
            t0 = time.perf_counter()
            chunk = runner(obs, prefix, delay)
            conn.send(("ok", chunk, time.perf_counter() - t0))
        except Exception as exc:  # reported to the caller, who holds the robot
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class InferenceProcess:
    """A checkpoint's policy in a spawned process; see the module docstring.

    Args:
        checkpoint: The checkpoint folder.
        cameras: Cameras the policy reads (default: its config's).
        imports: Modules that register policies.
        device: Where the worker runs the model.
        threads: torch threads of the worker.
        cpu: Pin the worker to this CPU core (Linux), keeping it off the control loop's core.
        seed: Seed of the worker's noise generator.
        rtc_beta_max: Real-time chunking's guidance clip (``DeployConfig.rtc.beta_max``; None: the policy's).
        cond, guidance, num_steps: Sampling values (:class:`~vla.runtime.runner.PolicyRunner`; resolve them
            against the checkpoint's defaults with :func:`vla.runtime.defaults.resolve`).
        timeout_s: How long to wait for the worker to load the policy.
    """

    def __init__(
        self,
        checkpoint: str,
        *,
        cameras: Sequence[str] | None = None,
        imports: Sequence[str] = ("policies",),
        device: str = "cpu",
        threads: int = 1,
        cpu: int | None = None,
        seed: int | None = 0,
        rtc_beta_max: float | None = None,
        cond: int | None = None,
        guidance: float | None = None,
        num_steps: int | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        spec = {
            "cameras": list(cameras) if cameras else None,
            "imports": list(imports),
            "device": device,
            "threads": threads,
            "cpu": cpu,
            "seed": seed,
            "rtc_beta_max": rtc_beta_max,
            "cond": cond,
            "guidance": guidance,
            "num_steps": num_steps,
        }
        self.process = ctx.Process(target=_serve, args=(child, str(checkpoint), spec), daemon=True)
        self.process.start()
        if not self._conn.poll(timeout_s):
            self.close()
            raise TimeoutError(f"inference process did not load {checkpoint} within {timeout_s} s")
        kind, info = self._conn.recv()
        if kind != "ready":
            self.close()
            raise RuntimeError(f"inference process could not load {checkpoint}:\n{info}")
        self.chunk_size: int = info["chunk_size"]
        self.action_dim: int = info["action_dim"]
        self.cameras: list[str] = info["cameras"]
        self.latencies: list[float] = []  # seconds of inference per chunk, measured in the worker
        self.round_trips: list[float] = []  # seconds per call, measured here (pipe + inference)

    def _ask(self, msg: tuple) -> tuple[Any, float]:
        if not self.process.is_alive():
            raise RuntimeError(f"inference process died (exit code {self.process.exitcode})")
        try:
            self._conn.send(msg)
            reply = self._conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError) as exc:
            raise RuntimeError(f"inference process died ({type(exc).__name__})") from exc
        if reply[0] != "ok":
            raise RuntimeError(f"inference process: {reply[1]}")
        return reply[1], reply[2]

    def __call__(
        self, obs: dict, prefix: np.ndarray | None = None, prefix_delay: int = 0
    ) -> np.ndarray:  # [H, A]
        t0 = time.perf_counter()
        wanted = {k: obs[k] for k in (*self.cameras, "state", "instruction") if k in obs}
        chunk, latency = self._ask(("sample", wanted, prefix, prefix_delay))
        self.round_trips.append(time.perf_counter() - t0)
        self.latencies.append(latency)
        return chunk

    def reseed(self, seed: int | None) -> None:
        self._ask(("reseed", seed))

    def close(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(BrokenPipeError, OSError):
                self._conn.send(("close",))
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
