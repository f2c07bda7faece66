"""``DeployConfig``: how a policy is deployed, one nested config per runtime component.

The same config drives sim evaluation (``vla-eval deploy.*=...``), sim rollouts and the robot; the stack
is built from it once (:func:`vla.runtime.stack.build_stack`). Each component keeps its own config class
beside its code; this module only nests them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vla.runtime.compensation import CompensationConfig
from vla.runtime.safety import SafetyConfig
from vla.runtime.upcycling import UpcyclingConfig


@dataclass
class ExecutorConfig:
    """How chunks become one action per period (:class:`~vla.runtime.executor.ChunkExecutor`); the
    execution horizon is :attr:`DeployConfig.horizon`."""

    temporal_ensemble: float | None = None  # ACT weight m: sample every step, average overlapping chunks
    # control periods per policy action: the loop runs this many times the policy's rate and sends setpoints
    # interpolated linearly between consecutive actions (a 10 Hz policy on a 50 Hz loop: 5)
    interpolate: int = 1

    def __post_init__(self) -> None:
        if self.interpolate < 1:
            raise ValueError(f"executor.interpolate={self.interpolate} must be >= 1")


@dataclass
class AsyncConfig:
    """Inference in the background while the current chunk executes
    (:class:`~vla.runtime.async_executor.AsyncChunkExecutor`)."""

    enabled: bool = False
    # a simulated inference delay of d control steps (sim, where the env waits for nobody); None: a real
    # background worker whose measured latency sets d
    simulated_delay: int | None = None

    def __post_init__(self) -> None:
        if self.simulated_delay is not None and self.simulated_delay < 0:
            raise ValueError(f"async_inference.simulated_delay={self.simulated_delay} must be >= 0")


@dataclass
class RTCConfig:
    """Real-time chunking: a new chunk inpaints the actions still committed from the previous one."""

    enabled: bool = False
    # the new chunk is guided toward the previous chunk's committed actions: the d executed while it is
    # computed (frozen) and ``soft_steps`` more of the old chunk's tail with decaying weight. None: the whole
    # tail, as in Black et al. 2025 (soft region to H - s), which holds the policy to a stale plan and costs
    # success here
    soft_steps: int | None = 3
    # the guidance weight's clip (beta in Black et al. 2025; None: the checkpoint's own, 10 by default).
    # soft_steps 3 and beta_max 2 were chosen on tuning seeds of reach and pick_place: the least success
    # cost among the variants that still cut the jerk (docs/results.md)
    beta_max: float | None = 2.0

    def __post_init__(self) -> None:
        if self.beta_max is not None and self.beta_max <= 0:
            raise ValueError(f"rtc.beta_max={self.beta_max} must be > 0")
        if self.soft_steps is not None and self.soft_steps < 0:
            raise ValueError(f"rtc.soft_steps={self.soft_steps} must be >= 0")


@dataclass
class DeployConfig:
    """The deployment stack: executor -> (async inference, RTC, upcycling) -> compensation -> safety."""

    # h, actions executed per chunk (``deploy.horizon`` on every CLI, ``horizon`` in the ROS node's
    # deploy_overrides); None: the checkpoint's (deploy.yaml, resolved by deploy_checkpoint:
    # vla.runtime.defaults), else the whole chunk (1 with ensembling)
    horizon: int | None = None
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    async_inference: AsyncConfig = field(default_factory=AsyncConfig)
    rtc: RTCConfig = field(default_factory=RTCConfig)
    upcycling: UpcyclingConfig = field(default_factory=UpcyclingConfig)
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    compensation: CompensationConfig = field(default_factory=lambda: CompensationConfig(enabled=False))
    # host:port of a ``vla-serve``: the policy runs there (vla.runtime.remote; token: VLA_SERVE_TOKEN)
    remote: str | None = None
    remote_timeout_s: float = 10.0  # deadline of one chunk request (a miss is a fault: the arm holds)

    def __post_init__(self) -> None:
        if self.horizon is not None and self.horizon < 1:
            raise ValueError(f"horizon={self.horizon} must be >= 1")
        if self.remote is not None and (
            ":" not in self.remote or not self.remote.rsplit(":", 1)[1].isdigit()
        ):
            raise ValueError(f"remote={self.remote!r}: give host:port of a vla-serve")
        if self.remote_timeout_s <= 0:
            raise ValueError(f"remote_timeout_s={self.remote_timeout_s} must be > 0")
        if self.executor.temporal_ensemble is not None and self.horizon not in (None, 1):
            raise ValueError(
                f"executor.temporal_ensemble samples a chunk every step: horizon={self.horizon} must be 1"
            )
        if self.rtc.enabled and not self.async_inference.enabled:
            raise ValueError(
                "rtc.enabled needs async_inference.enabled (RTC inpaints while a chunk executes)"
            )
        if self.executor.temporal_ensemble is not None and self.async_inference.enabled:
            raise ValueError("executor.temporal_ensemble and async_inference cannot be combined")


# old spellings of a key -> the key now (relative to the deployment config): refused in one line
RENAMED = {"executor.horizon": "horizon"}
