"""A checkpoint's policy answering chunk requests: what the server does with one request, without gRPC.

A request (:mod:`vla.serving.wire`) carries the observation (``state``, ``image.<camera>`` uint8 [H, W, 3],
the instruction), the sampling values the client resolved (cond, guidance, num_steps), optionally the RTC
prefix and delay, and the client's noise generator state. The reply carries the chunk [H, A], the
generator state after sampling and the inference time. The server keeps no per-client state: the client
owns its noise stream, so a remote episode draws exactly the noise a local one does, any number of
clients share one server, and a restarted server continues an episode unchanged.

Every field is checked before the policy runs; a bad one raises :class:`RequestError` naming it.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vla.checkpoint import read_config
from vla.policy import import_policy_modules, load_policy
from vla.runtime.defaults import DeployDefaults, checkpoint_defaults
from vla.runtime.runner import PolicyRunner
from vla.runtime.upcycling import UPCYCLING_FILE

GENERATOR_BYTES = int(torch.Generator().get_state().numel())  # a CPU generator's state
MAX_INSTRUCTION = 10_000  # characters
MAX_STEPS = 1000  # integration steps a request may ask for


class RequestError(ValueError):
    """A request the server refuses (one line naming the field); the server goes on serving."""


class PolicyService:
    """Load ``checkpoint`` once; :meth:`info` describes it, :meth:`sample` answers one request.

    Requests run one at a time (one model, one device); gRPC's handler threads queue on a lock.
    """

    def __init__(
        self, checkpoint: str | Path, *, device: str = "cpu", imports: Sequence[str] = ("policies",)
    ) -> None:
        import_policy_modules(imports)
        self.checkpoint = Path(checkpoint)
        self.policy = load_policy(checkpoint, device)
        self.device = device
        self.config = read_config(checkpoint)
        own = getattr(getattr(self.policy, "config", None), "cameras", None)
        self.cameras: list[str] | None = list(own) if own else None  # None: the client's cameras
        size = self.config.get("image_size")
        self.image_size = tuple(int(v) for v in size) if size else None
        self.chunk_size = int(self.policy.chunk_size)
        self.action_dim = int(self.policy.action_dim)
        calib = self.checkpoint / UPCYCLING_FILE
        self.calibration = json.loads(calib.read_text()) if calib.is_file() else None
        saved = DeployDefaults.load(checkpoint)
        self.defaults = asdict(saved) if saved is not None else None
        self.resolved_defaults = asdict(checkpoint_defaults(checkpoint))
        self._runners: dict[tuple, PolicyRunner] = {}
        self._lock = threading.Lock()

    def info(self) -> dict[str, Any]:
        """What a client needs to deploy this checkpoint without its files: its ``config.yaml``,
        ``deploy.yaml`` (None when absent) and ``upcycling.json``, and the policy's shapes."""
        return {
            "checkpoint": str(self.checkpoint),
            "type": self.config.get("type"),
            "config": self.config,
            "deploy": self.defaults,
            "calibration": self.calibration,
            "chunk_size": self.chunk_size,
            "action_dim": self.action_dim,
            "cameras": self.cameras,
            "image_size": list(self.image_size) if self.image_size else None,
        }

    def resolved_sampling(self) -> dict[str, Any]:
        """The checkpoint's own cond, guidance and num_steps (for clients that send none)."""
        return {k: self.resolved_defaults[k] for k in ("cond", "guidance", "num_steps")}

    def sample(
        self, meta: dict[str, Any], arrays: dict[str, np.ndarray]
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """One chunk: ``(meta, arrays)`` of the reply. Raises :class:`RequestError` for a bad request."""
        obs, cameras = self._observation(meta, arrays)
        prefix, delay = self._prefix(meta, arrays)
        gen = arrays.get("generator")
        if gen is not None and (gen.dtype != np.uint8 or gen.shape != (GENERATOR_BYTES,)):
            raise RequestError(f"generator: uint8 [{GENERATOR_BYTES}] expected, got {gen.dtype} {gen.shape}")
        runner = self._runner(cameras, *self._sampling(meta))
        beta = meta.get("rtc_beta_max")
        if beta is not None and (not isinstance(beta, int | float) or not 0 < beta < math.inf):
            raise RequestError(f"rtc_beta_max={beta!r}: a positive number or null")
        config = getattr(self.policy, "config", None)
        with self._lock:
            if beta is not None and hasattr(config, "rtc_beta_max"):  # as PolicyRunner(rtc_beta_max=) does
                config.rtc_beta_max = float(beta)  # type: ignore[union-attr]
            t0 = time.perf_counter()
            if gen is None:
                runner.reseed(None)
            else:
                runner.generator.set_state(torch.from_numpy(gen.copy()))
            chunk = runner(obs, prefix, delay)
            latency = time.perf_counter() - t0
            state = runner.generator.get_state().numpy()
        return {"latency_s": latency}, {"chunk": chunk.astype(np.float32), "generator": state}

    # ---- request fields -------------------------------------------------------------------------------
    def _observation(
        self, meta: dict[str, Any], arrays: dict[str, np.ndarray]
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        state = arrays.get("state")
        if state is None:
            raise RequestError("state: missing (a 1-d float array)")
        if state.ndim != 1 or state.dtype.kind != "f":
            raise RequestError(f"state: a 1-d float array expected, got {state.dtype} {state.shape}")
        want = self.config.get("state_dim")
        if isinstance(want, int) and state.shape[0] != want:
            raise RequestError(f"state: {state.shape[0]} values for a policy of state_dim={want}")
        if not np.isfinite(state).all():
            raise RequestError("state: non-finite values")
        instruction = meta.get("instruction", "")
        if not isinstance(instruction, str) or len(instruction) > MAX_INSTRUCTION:
            raise RequestError(f"instruction: a string of at most {MAX_INSTRUCTION} characters expected")
        images = {k.removeprefix("image."): v for k, v in arrays.items() if k.startswith("image.")}
        cameras = tuple(self.cameras if self.cameras is not None else sorted(images))
        missing = [c for c in cameras if c not in images]
        if missing:
            raise RequestError(f"image.{missing[0]}: missing (the policy reads cameras {list(cameras)})")
        for cam in cameras:
            img = images[cam]
            if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
                raise RequestError(f"image.{cam}: uint8 [H, W, 3] expected, got {img.dtype} {img.shape}")
            if self.image_size and tuple(img.shape[:2]) != self.image_size:
                raise RequestError(
                    f"image.{cam}: {img.shape[0]}x{img.shape[1]} for a policy trained on "
                    f"{self.image_size[0]}x{self.image_size[1]} (render at its image_size)"
                )
        obs = {
            **{c: images[c] for c in cameras},
            "state": state.astype(np.float32),
            "instruction": instruction,
        }
        return obs, cameras

    def _prefix(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple[np.ndarray | None, int]:
        prefix = arrays.get("prefix")
        delay = meta.get("prefix_delay", 0)
        if prefix is None:
            return None, 0
        if prefix.ndim != 2 or prefix.shape[1] != self.action_dim or not 0 < len(prefix) <= self.chunk_size:
            raise RequestError(
                f"prefix: [P, {self.action_dim}] with 0 < P <= {self.chunk_size} expected, got {prefix.shape}"
            )
        if not np.isfinite(prefix).all():
            raise RequestError("prefix: non-finite values")
        if not isinstance(delay, int) or not 0 <= delay <= len(prefix):
            raise RequestError(f"prefix_delay={delay!r}: an integer in [0, {len(prefix)}] expected")
        return prefix.astype(np.float32), delay

    @staticmethod
    def _sampling(meta: dict[str, Any]) -> tuple[int | None, float | None, int | None]:
        cond, guidance, steps = meta.get("cond"), meta.get("guidance"), meta.get("num_steps")
        if cond not in (None, 0, 1) or isinstance(cond, bool):
            raise RequestError(f"cond={cond!r}: 0, 1 or null")
        if guidance is not None and (not isinstance(guidance, int | float) or not math.isfinite(guidance)):
            raise RequestError(f"guidance={guidance!r}: a finite number or null")
        if steps is not None and (not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS):
            raise RequestError(f"num_steps={steps!r}: an integer in [1, {MAX_STEPS}] or null")
        return cond, guidance, steps

    def _runner(
        self, cameras: tuple[str, ...], cond: int | None, guidance: float | None, steps: int | None
    ) -> PolicyRunner:
        key = (cameras, cond, guidance, steps)
        if key not in self._runners:  # the values were resolved by the client; None stays None here
            runner = PolicyRunner(self.policy, cameras=cameras, device=self.device, seed=0)
            runner.cond = (
                None if cond is None else torch.full((1,), cond, dtype=torch.long, device=self.device)
            )
            runner.guidance, runner.num_steps = guidance, steps
            self._runners[key] = runner
        return self._runners[key]
