"""``RemoteSampler``: a :data:`~vla.runtime.executor.SampleFn` whose policy runs in ``vla-serve`` elsewhere.

``deploy.remote=<host:port>`` puts it where the local :class:`~vla.runtime.runner.PolicyRunner` would be,
in every deployment (``vla-eval``, ``vla-rollout``, the ROS 2 node). It keeps the noise stream here: each
request carries the generator state and the reply the state after sampling, so under the same seeds a
remote episode samples exactly the chunks a local one does. The executors time the call itself, so their
latency model (when async inference sends the next request, RTC's frozen delay) uses the measured round
trip.

A failed call (server gone, deadline passed, request refused) raises ``RuntimeError`` naming the server;
the safety layer turns that into a hold. The token comes from ``VLA_SERVE_TOKEN`` (never a command line).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from vla.runtime.runner import reseed
from vla.serving import wire
from vla.serving.wire import SERVICE, TOKEN_ENV

MAX_REPLY = 64 * 2**20


class RemoteSampler:
    """Chunks from the ``vla-serve`` at ``address`` (``host:port``).

    Args:
        address: The server.
        cameras: Cameras to send (default: the served policy's, else every camera in the observation).
        cond, guidance, num_steps: Sampling values, resolved by the caller against the checkpoint's
            defaults (:func:`vla.runtime.defaults.resolve` on :attr:`info`); sent with every request.
        rtc_beta_max: Real-time chunking's guidance clip (None: the checkpoint's).
        seed: Seed of the noise stream (:meth:`reseed` at each episode start).
        timeout_s: Deadline of one call, and of reaching the server at start.
        token: The server's token (default: ``VLA_SERVE_TOKEN``; None where unset).

    Raises:
        ConnectionError: The server cannot be reached, or refuses the token, within ``timeout_s``.
    """

    def __init__(
        self,
        address: str,
        *,
        cameras: list[str] | None = None,
        cond: int | None = None,
        guidance: float | None = None,
        num_steps: int | None = None,
        rtc_beta_max: float | None = None,
        seed: int | None = 0,
        timeout_s: float = 10.0,
        token: str | None = None,
    ) -> None:
        import grpc

        self.address = address
        self.timeout_s = timeout_s
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        options = [
            ("grpc.max_receive_message_length", MAX_REPLY),
            ("grpc.max_send_message_length", MAX_REPLY),
        ]
        self._channel = grpc.insecure_channel(address, options=options)
        self._info_call = self._channel.unary_unary(f"/{SERVICE}/Info")
        self._sample_call = self._channel.unary_unary(f"/{SERVICE}/Sample")
        try:
            raw = self._info_call(
                wire.encode({}), timeout=timeout_s, metadata=self._metadata, wait_for_ready=True
            )
        except grpc.RpcError as exc:
            self._channel.close()
            raise ConnectionError(f"policy server {address}: {_status(exc)}") from None
        self.info: dict[str, Any] = wire.decode(raw)[0]
        self.chunk_size: int = int(self.info["chunk_size"])
        self.action_dim: int = int(self.info["action_dim"])
        self.cameras: list[str] | None = cameras or self.info.get("cameras")
        self.sampling = {
            "cond": cond,
            "guidance": guidance,
            "num_steps": num_steps,
            "rtc_beta_max": rtc_beta_max,
        }
        self.generator = torch.Generator()
        self.reseed(seed)
        self.last_latency_s: float | None = None  # the server's inference time of the last chunk
        self.latencies: list[float] = []  # the server's inference seconds per chunk
        self.round_trips: list[float] = []  # seconds per call, measured here (network + inference)

    def reseed(self, seed: int | None) -> None:
        """Restart the noise stream (None: a nondeterministic seed); no call to the server."""
        reseed(self.generator, seed)

    def __call__(
        self, obs: Mapping[str, Any], prefix: np.ndarray | None = None, prefix_delay: int = 0
    ) -> np.ndarray:  # [H, A]
        import grpc

        t0 = time.perf_counter()
        cameras = self.cameras if self.cameras is not None else [k for k, v in obs.items() if _is_image(v)]
        missing = [c for c in cameras if c not in obs]
        if missing:
            raise KeyError(f"observation has no camera {missing}; it has {sorted(obs)}")
        arrays = {f"image.{c}": np.asarray(obs[c]) for c in cameras}
        arrays["state"] = np.asarray(obs["state"], dtype=np.float32)
        arrays["generator"] = self.generator.get_state().numpy()
        meta: dict[str, Any] = {k: v for k, v in self.sampling.items() if v is not None}
        meta["instruction"] = str(obs.get("instruction", "") or "")
        if prefix is not None and len(prefix):
            arrays["prefix"] = np.asarray(prefix, dtype=np.float32)
            meta["prefix_delay"] = int(prefix_delay)
        try:
            raw = self._sample_call(
                wire.encode(meta, arrays), timeout=self.timeout_s, metadata=self._metadata
            )
        except grpc.RpcError as exc:
            raise RuntimeError(f"policy server {self.address}: {_status(exc)}") from None
        reply, out = wire.decode(raw)
        self.generator.set_state(torch.from_numpy(out["generator"].copy()))
        self.last_latency_s = float(reply["latency_s"])
        self.latencies.append(self.last_latency_s)
        self.round_trips.append(time.perf_counter() - t0)
        return out["chunk"]

    def close(self) -> None:
        self._channel.close()


def _is_image(v: Any) -> bool:
    return isinstance(v, np.ndarray) and v.dtype == np.uint8 and v.ndim == 3 and v.shape[-1] == 3


def _status(exc: Any) -> str:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return f"{getattr(code, 'name', code)}: {details}"


def served_checkpoint(
    address: str, checkpoint: str | None = None, *, timeout_s: float = 10.0, root: str | None = None
) -> tuple[str, dict[str, Any]]:
    """The folder a deployment reads the served checkpoint's settings from, and the server's info.

    Without ``checkpoint``: the server's ``config.yaml``, ``deploy.yaml`` and ``upcycling.json`` written
    into a folder under ``root`` (default: the temp dir) named by their hash (the model stays on the
    server). With one: that folder, after checking that the server serves the same ``config.yaml``.

    Raises:
        ConnectionError: The server cannot be reached.
        InputError: ``checkpoint`` differs from the served one.
    """
    import hashlib
    import json
    import tempfile
    from pathlib import Path

    import yaml

    from vla.checkpoint import read_config
    from vla.errors import InputError

    client = RemoteSampler(address, timeout_s=timeout_s)
    info = client.info
    client.close()
    if checkpoint:
        if read_config(checkpoint) != info["config"]:
            raise InputError(
                f"deploy.remote={address} serves {info['checkpoint']}, whose config.yaml differs from "
                f"checkpoint={checkpoint}'s: serve that checkpoint, or leave checkpoint= unset"
            )
        return str(checkpoint), info
    files = {"config": info["config"], "deploy": info["deploy"], "calibration": info["calibration"]}
    digest = hashlib.sha1(json.dumps(files, sort_keys=True).encode()).hexdigest()[:12]
    folder = Path(root or tempfile.gettempdir()) / "vla-remote" / f"{info.get('type')}-{digest}"
    if not (folder / "config.yaml").is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=folder.parent))
        (staging / "config.yaml").write_text(yaml.safe_dump(info["config"], sort_keys=False))
        if info["deploy"] is not None:
            (staging / "deploy.yaml").write_text(yaml.safe_dump(info["deploy"], sort_keys=False))
        if info["calibration"] is not None:
            (staging / "upcycling.json").write_text(json.dumps(info["calibration"]))
        try:
            staging.rename(folder)
        except OSError:  # another worker wrote it first: the same content
            import shutil

            shutil.rmtree(staging, ignore_errors=True)
    return str(folder), info
