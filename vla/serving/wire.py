"""The bytes of one request or reply: a safetensors file whose ``__metadata__`` holds a JSON header.

Arrays travel as safetensors tensors (dtype and shape checked by the reader), everything else (the
instruction, the RTC delay, the measured latency, a checkpoint's config) as JSON. Nothing is unpickled.
``MAGIC`` in front names the format and its version, so a stray message is refused in one line.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

SERVICE = "vla.PolicyServer"  # the gRPC service of our protocol (Info, Sample)
TOKEN_ENV = "VLA_SERVE_TOKEN"  # where servers and clients read the token
MAGIC = b"VLA1"
MAX_HEADER = 1 << 20  # bytes of safetensors header a message may carry


class WireError(ValueError):
    """A message that is not one of ours, or whose content is malformed (one line)."""


def encode(meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray] | None = None) -> bytes:
    from safetensors.numpy import save

    tensors = {k: np.ascontiguousarray(v) for k, v in (arrays or {}).items()}
    return MAGIC + save(tensors, metadata={"json": json.dumps(dict(meta))})


def decode(data: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(meta, arrays)`` of a message.

    Raises:
        WireError: Not our format, a truncated or garbled safetensors body, or a header that is not JSON.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load

    if not data.startswith(MAGIC):
        raise WireError(f"not a vla-serve message (it starts with {bytes(data[:4])!r}, not {MAGIC!r})")
    body = bytes(data[len(MAGIC) :])
    if len(body) < 8:
        raise WireError(f"truncated message ({len(data)} bytes)")
    (n,) = struct.unpack("<Q", body[:8])
    if n > min(MAX_HEADER, len(body) - 8):
        raise WireError(f"header of {n} bytes in a message of {len(data)} bytes")
    try:
        header = json.loads(body[8 : 8 + n])
        meta = json.loads(header.get("__metadata__", {}).get("json", "{}"))
        arrays = load(body)
    except (ValueError, SafetensorError, AttributeError) as exc:
        raise WireError(f"malformed message: {exc}") from None
    if not isinstance(meta, dict):
        raise WireError(f"malformed message: its header is a {type(meta).__name__}, not a mapping")
    return meta, arrays
