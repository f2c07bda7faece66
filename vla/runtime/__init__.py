"""The deployment runtime: one code path drives a policy in sim evaluation and on a robot.

``PolicyRunner`` (policy -> ``SampleFn``) feeds a ``ChunkExecutor`` (chunks -> one action per step). The
executor needs only numpy, so a robot-side process that talks to a remote policy server never imports
torch: ``PolicyRunner`` is imported on first use.
"""

from typing import TYPE_CHECKING, Any

from vla.runtime.executor import ChunkExecutor, NonFiniteChunkError, SampleFn

if TYPE_CHECKING:
    from vla.runtime.runner import PolicyRunner

__all__ = ["ChunkExecutor", "NonFiniteChunkError", "PolicyRunner", "SampleFn"]


def __getattr__(name: str) -> Any:
    if name == "PolicyRunner":
        from vla.runtime.runner import PolicyRunner

        return PolicyRunner
    raise AttributeError(f"module 'vla.runtime' has no attribute {name!r}")
