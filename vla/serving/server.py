"""``vla-serve checkpoint=<dir>``: a checkpoint's policy served over gRPC.

Two services on one port:

- ``vla.PolicyServer`` (``Info``, ``Sample``): our protocol, what :class:`vla.runtime.remote.RemoteSampler`
  speaks (``deploy.remote=<host:port>`` in ``vla-eval``, ``vla-rollout`` and the ROS 2 node). Messages
  are safetensors with a JSON header (:mod:`vla.serving.wire`); nothing is unpickled.
- ``transport.AsyncInference``: LeRobot's async-inference protocol, so LeRobot's ``robot_client`` drives
  a robot with our checkpoint (:mod:`vla.serving.lerobot_protocol`).

A bad request (malformed, oversized, wrong shape, wrong token) gets an error status with one line naming
what was wrong, and the server goes on serving. Bound to anything but loopback, the server requires a
token (``VLA_SERVE_TOKEN`` or ``token_file=``), which clients send as ``authorization: Bearer <token>``.
The connection itself is not encrypted: beyond a trusted network, tunnel it (SSH) or put it behind TLS.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import signal
import sys
import threading
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from vla.errors import InputError
from vla.serving import wire
from vla.serving.policy_service import PolicyService, RequestError
from vla.serving.wire import SERVICE, TOKEN_ENV


@dataclass
class ServeConfig:
    """``vla-serve`` options."""

    checkpoint: str = ""  # the checkpoint folder to serve (required)
    host: str = "127.0.0.1"  # anything but loopback needs a token
    port: int = 8080  # 0: any free port (printed)
    device: str = "cpu"
    threads: int = 1  # torch threads of the inference
    imports: list[str] = field(default_factory=lambda: ["policies"])  # modules that register policies
    token_file: str | None = None  # a file holding the token (else the VLA_SERVE_TOKEN variable)
    max_request_mb: float = 16.0  # larger requests are refused by gRPC (RESOURCE_EXHAUSTED)
    handlers: int = 4  # gRPC handler threads (inference itself runs one request at a time)
    fps: float = 30.0  # LeRobot's robot client: the time between a chunk's actions is 1 / fps

    def __post_init__(self) -> None:
        if not self.checkpoint:
            raise InputError("checkpoint=<folder> is required")
        if not 0 <= self.port < 65536:
            raise InputError(f"port={self.port} must be in [0, 65535]")
        if self.max_request_mb <= 0 or self.handlers < 1 or self.fps <= 0 or self.threads < 1:
            raise InputError("max_request_mb, handlers, fps and threads must be positive")


def read_token(cfg: ServeConfig) -> str | None:
    if cfg.token_file:
        path = Path(cfg.token_file)
        if not path.is_file():
            raise InputError(f"token_file={path}: no such file")
        token = path.read_text().strip()
        if not token:
            raise InputError(f"token_file={path}: the file is empty")
        return token
    return os.environ.get(TOKEN_ENV) or None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def check_binding(cfg: ServeConfig) -> str | None:
    """The token; refuses a server reachable from other machines without one."""
    token = read_token(cfg)
    if token is None and not is_loopback(cfg.host):
        raise InputError(
            f"host={cfg.host} is reachable from other machines: give a token ({TOKEN_ENV}=... or "
            "token_file=...), or serve on host=127.0.0.1"
        )
    return token


class TokenCheck(grpc.ServerInterceptor):
    """Every call must carry ``authorization: Bearer <token>``; others get UNAUTHENTICATED."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = continuation(details)
        given = dict(details.invocation_metadata or ()).get("authorization", "")
        if handler is None or hmac.compare_digest(str(given).encode(), self._expected):
            return handler

        def deny(_request: Any, context: grpc.ServicerContext) -> None:
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED, "wrong or missing token (authorization: Bearer ...)"
            )

        if handler.unary_unary is not None:
            return handler._replace(unary_unary=deny)
        if handler.stream_unary is not None:
            return handler._replace(stream_unary=deny)
        return None  # no other kinds are served


class PolicyServer:
    """The gRPC server around a :class:`PolicyService` (both services); :meth:`start` binds the port."""

    def __init__(self, cfg: ServeConfig, service: PolicyService | None = None) -> None:
        token = check_binding(cfg)
        self.cfg = cfg
        self.service = service or PolicyService(cfg.checkpoint, device=cfg.device, imports=cfg.imports)
        limit = int(cfg.max_request_mb * 2**20)
        options = [
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", 64 * 2**20),
            ("grpc.so_reuseport", 0),  # a second server on a port in use fails instead of sharing it
        ]
        interceptors = [TokenCheck(token)] if token else []
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=cfg.handlers), options=options, interceptors=interceptors
        )
        handlers = {
            "Info": grpc.unary_unary_rpc_method_handler(self._info),
            "Sample": grpc.unary_unary_rpc_method_handler(self._sample),
        }
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        from vla.serving.lerobot_protocol import add_lerobot_service

        add_lerobot_service(self.server, self.service, fps=cfg.fps)
        self.port: int | None = None

    def start(self) -> int:
        """Bind and start; returns the port (the free one picked for ``port=0``)."""
        try:
            port = self.server.add_insecure_port(f"{self.cfg.host}:{self.cfg.port}")
        except RuntimeError:  # newer gRPC raises where older ones returned 0
            port = 0
        if port == 0:
            raise InputError(f"cannot bind {self.cfg.host}:{self.cfg.port} (in use, or not an address here)")
        self.server.start()
        self.port = port
        return port

    def stop(self, grace: float = 1.0) -> None:
        self.server.stop(grace).wait()

    # ---- our protocol ---------------------------------------------------------------------------------
    def _info(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        return wire.encode(self.service.info())

    def _sample(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            meta, arrays = wire.decode(request)
            reply, out = self.service.sample(meta, arrays)
        except (wire.WireError, RequestError) as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except Exception as exc:  # the policy failed on this request: say so, keep serving
            context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")
        return wire.encode(reply, out)


def _parse(argv: list[str]) -> ServeConfig:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    schema = OmegaConf.structured(ServeConfig)  # the field defaults; __post_init__ runs on the result
    try:
        given = OmegaConf.from_dotlist(argv)
        merged = OmegaConf.merge(schema, given)
    except OmegaConfBaseException as exc:
        raise InputError(
            f"{' '.join(argv)}: {str(exc).splitlines()[0]} (options: {', '.join(schema)})"
        ) from None
    values: dict[str, Any] = OmegaConf.to_container(merged)  # type: ignore[assignment]
    return ServeConfig(**values)


def main(argv: list[str] | None = None) -> None:
    """``vla-serve checkpoint=<dir> [host=127.0.0.1] [port=8080] [device=cpu] ...``"""
    from vla.errors import exit_on_refusal

    args = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        print("options: " + ", ".join(f"{k}=" for k in ServeConfig.__dataclass_fields__))
        return
    with exit_on_refusal():
        cfg = _parse(args)
        token = check_binding(cfg)
        import torch

        torch.set_num_threads(cfg.threads)
        if not Path(cfg.checkpoint).is_dir():
            raise InputError(f"checkpoint={cfg.checkpoint}: no such folder")
        from vla.checks import check_checkpoint

        check_checkpoint(cfg.checkpoint, imports=cfg.imports)
        server = PolicyServer(cfg)
        port = server.start()
    print(f"serving {cfg.checkpoint} on {cfg.host}:{port} (token {'required' if token else 'off'})")
    sys.stdout.flush()
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop()


if __name__ == "__main__":
    main()
