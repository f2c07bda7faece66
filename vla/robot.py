"""Robots and teleoperators as the deployment runtime sees them.

One description per arm (:class:`RobotProfile`: joint names and limits, gripper model, control rate,
cameras, Cartesian workspace, kinematics) and two protocols that everything the runtime drives
implements: :class:`Robot` (the MuJoCo arm in ``sim/``, LeRobot's robots behind ``hardware/lerobot.py``,
a ROS 2 node's topics) and :class:`Teleoperator` (the simulated operator, LeRobot's gamepad / keyboard /
leader arms, ROS topics). The profiles themselves live in ``hardware/profiles/``.

Units: joint positions in rad (rad/s, rad/s^2), Cartesian positions in m in the robot's base frame; the
gripper in its own units (``GripperModel.units``). An action is ``[arm joint targets..., gripper target]``
(the gripper entry only when the profile has one). Every observation carries the capture time of each of
its inputs on the robot's clock (:meth:`Robot.now`), so the safety layer can tell a stale frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np


def _floats(values) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


@dataclass(frozen=True)
class JointLimits:
    """Per arm joint: position range (rad), velocity (rad/s) and acceleration (rad/s^2) limits."""

    lower: tuple[float, ...]
    upper: tuple[float, ...]
    max_velocity: tuple[float, ...]
    max_acceleration: tuple[float, ...]

    def __post_init__(self) -> None:
        for name in ("lower", "upper", "max_velocity", "max_acceleration"):
            object.__setattr__(self, name, _floats(getattr(self, name)))
        n = len(self.lower)
        if not (len(self.upper) == len(self.max_velocity) == len(self.max_acceleration) == n):
            raise ValueError(
                "joint limits: lower, upper, max_velocity and max_acceleration need the same length "
                f"(got {n}, {len(self.upper)}, {len(self.max_velocity)}, {len(self.max_acceleration)})"
            )
        bad = [j for j in range(n) if self.upper[j] < self.lower[j]]
        if bad:
            raise ValueError(f"joint limits: upper < lower at joint(s) {bad}")
        if any(v <= 0 for v in self.max_velocity + self.max_acceleration):
            raise ValueError("joint limits: max_velocity and max_acceleration must be > 0")

    def __len__(self) -> int:
        return len(self.lower)

    def contains(self, q: np.ndarray, tolerance: float = 0.0) -> np.ndarray:
        """Per joint: whether ``q`` [J] lies inside [lower - tol, upper + tol]."""
        q = np.asarray(q, dtype=np.float64)
        return (q >= np.asarray(self.lower) - tolerance) & (q <= np.asarray(self.upper) + tolerance)


@dataclass(frozen=True)
class GripperModel:
    """A gripper commanded by a target opening between ``closed`` and ``open`` (its own controller moves
    it there at up to ``max_speed``), not a joint with the arm's velocity limits. ``binary``: the device
    only knows open/close (a target nearer ``open`` opens)."""

    closed: float
    open: float
    max_speed: float  # units / s
    units: str = "m"
    binary: bool = False

    def __post_init__(self) -> None:
        if self.open == self.closed or self.max_speed <= 0:
            raise ValueError(
                f"gripper: open={self.open} must differ from closed={self.closed}, max_speed > 0"
            )

    @property
    def range(self) -> tuple[float, float]:
        return (min(self.closed, self.open), max(self.closed, self.open))

    def clip(self, target: float) -> float:
        """The target the device can reach (a binary gripper snaps to open or closed)."""
        lo, hi = self.range
        if self.binary:
            mid = (self.open + self.closed) / 2
            return self.open if (target - mid) * (self.open - self.closed) >= 0 else self.closed
        return float(min(max(target, lo), hi))


@dataclass(frozen=True)
class Workspace:
    """An axis-aligned box (m, robot base frame) the tool point must stay inside."""

    lower: tuple[float, float, float]
    upper: tuple[float, float, float]

    def __post_init__(self) -> None:
        object.__setattr__(self, "lower", _floats(self.lower))
        object.__setattr__(self, "upper", _floats(self.upper))
        if (
            len(self.lower) != 3
            or len(self.upper) != 3
            or any(u <= lo for lo, u in zip(self.lower, self.upper, strict=True))
        ):
            raise ValueError(f"workspace: need 3-d lower < upper, got {self.lower}, {self.upper}")

    def violation(self, p: np.ndarray) -> str | None:
        """None when ``p`` [3] is inside; else which axis leaves the box, by how much."""
        for i, axis in enumerate("xyz"):
            if p[i] < self.lower[i]:
                return f"{axis}={p[i]:.3f} m below {self.lower[i]:.3f}"
            if p[i] > self.upper[i]:
                return f"{axis}={p[i]:.3f} m above {self.upper[i]:.3f}"
        return None


class Kinematics(Protocol):
    """Forward kinematics of an arm (``vla.kinematics``): joint positions -> tool point in the base frame."""

    def tool_position(self, q: np.ndarray) -> np.ndarray: ...  # [J] -> [3]


@dataclass(frozen=True)
class CameraSpec:
    name: str
    height: int = 96
    width: int = 96


@dataclass(frozen=True)
class RobotProfile:
    """Everything the runtime, the safety layer, the simulator's model and the ROS node need to know about
    an arm. Described once per arm in ``hardware/profiles/``."""

    name: str
    joints: tuple[str, ...]  # arm joint names, in action order
    limits: JointLimits  # per arm joint
    gripper: GripperModel | None  # one more action entry after the arm joints, when present
    control_hz: float
    cameras: tuple[CameraSpec, ...] = ()
    home: tuple[float, ...] = ()  # arm joint positions of a safe start pose
    workspace: Workspace | None = None
    kinematics: Kinematics | None = None
    description: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "joints", tuple(self.joints))
        object.__setattr__(self, "home", _floats(self.home))
        n = len(self.joints)
        if len(self.limits) != n:
            raise ValueError(f"profile {self.name}: {n} joints but limits for {len(self.limits)}")
        if self.home and len(self.home) != n:
            raise ValueError(f"profile {self.name}: home has {len(self.home)} values for {n} joints")
        if self.home and not self.limits.contains(np.asarray(self.home)).all():
            raise ValueError(f"profile {self.name}: home {self.home} outside the joint limits")
        if not 0 < self.control_hz <= 1000:
            raise ValueError(f"profile {self.name}: control_hz={self.control_hz} out of (0, 1000]")

    @property
    def arm_dim(self) -> int:
        return len(self.joints)

    @property
    def action_dim(self) -> int:
        return self.arm_dim + (self.gripper is not None)

    @property
    def action_names(self) -> tuple[str, ...]:
        return self.joints + (("gripper",) if self.gripper is not None else ())

    @property
    def camera_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.cameras)

    @property
    def dt(self) -> float:
        return 1.0 / self.control_hz


@dataclass(frozen=True)
class Capabilities:
    """What a robot implementation can do beyond observe / command / hold."""

    realtime: bool = True  # runs in wall-clock time: the episode loop paces itself to the control rate
    resettable: bool = False  # reset(seed) starts a new (seeded) episode by itself (a simulator)
    reports_success: bool = False  # status() knows whether the task succeeded
    joint_velocities: bool = False  # observations carry measured joint velocities


@dataclass
class Observation:
    """One observation: measured joints (and gripper), camera images, the instruction, and when each was
    captured (seconds on the robot's clock, :meth:`Robot.now`)."""

    joints: np.ndarray  # [J] rad
    joint_stamp: float
    gripper: float | None = None
    images: dict[str, np.ndarray] = field(default_factory=dict)  # name -> uint8 [H, W, 3]
    image_stamps: dict[str, float] = field(default_factory=dict)
    instruction: str = ""
    joint_velocities: np.ndarray | None = None  # [J] rad/s, when the robot measures them
    # the policy's proprioception where it is not [joints, gripper] (LIBERO: the end-effector pose and both
    # finger positions, as its datasets store them); None: ``state`` is the joints and the gripper
    proprio: np.ndarray | None = None

    @property
    def state(self) -> np.ndarray:  # [J (+1)] or [len(proprio)]
        """Proprioception as the policy reads it: ``proprio`` when the robot gives one, else the joint
        positions, then the gripper."""
        if self.proprio is not None:
            return np.asarray(self.proprio, dtype=np.float32)
        extra = [] if self.gripper is None else [self.gripper]
        return np.r_[np.asarray(self.joints, dtype=np.float64), extra].astype(np.float32)

    @property
    def stamp(self) -> float:
        """Capture time of the oldest input: what the watchdog ages."""
        return min([self.joint_stamp, *self.image_stamps.values()])

    def stalest(self) -> str:
        """The name of the oldest input (``joints`` or a camera)."""
        stamps = {"joints": self.joint_stamp, **self.image_stamps}
        return min(stamps, key=lambda k: stamps[k])

    def policy_input(self) -> dict:
        """The dict a :class:`~vla.runtime.runner.PolicyRunner` reads: cameras, ``state``, ``instruction``."""
        return {**self.images, "state": self.state, "instruction": self.instruction}


@dataclass
class EpisodeStatus:
    """What the robot (or its operator) knows about the episode: success (None: unknown) and whether
    it is over (a simulator's termination or time limit, an operator's stop)."""

    success: bool | None = None
    done: bool = False
    reward: float = 0.0  # the task's reward for the last period (a simulator's; 0 when unknown)


@runtime_checkable
class Robot(Protocol):
    """Anything the runtime drives: ``observe`` -> decide -> ``command`` once per control period, or
    ``hold`` (stay at the measured position) when the safety layer faults."""

    profile: RobotProfile
    capabilities: Capabilities

    def now(self) -> float:
        """The clock observation stamps are on (simulated time in sim, monotonic time on hardware)."""
        ...

    def observe(self) -> Observation: ...

    def command(self, action: np.ndarray) -> None:
        """Send ``action`` [arm_dim (+1)]: joint position targets and the gripper target, raw units.
        A simulator advances one control period here."""
        ...

    def hold(self) -> None:
        """Stop: hold the measured position (a simulator also advances one period)."""
        ...

    def reset(self, seed: int | None = None) -> None:
        """Start an episode (a simulator places a new seeded scene; hardware starts where it is)."""
        ...

    def status(self) -> EpisodeStatus: ...


@runtime_checkable
class Teleoperator(Protocol):
    """A source of commands plus an "engaged" signal: while engaged, its command replaces the policy's.

    The takeover / hand-back semantics (what is recorded, when the policy replans) live in one place,
    :class:`vla.runtime.takeover.Takeover`; implementations only say whether the person is in control
    and what they command.
    """

    def reset(self, robot: Robot) -> None:
        """A new episode starts on ``robot`` (called after ``robot.reset``)."""
        ...

    def engaged(self, obs: Observation) -> bool: ...

    def action(self, obs: Observation) -> np.ndarray:
        """The operator's command [arm_dim (+1)] in the robot's action units (called only when engaged)."""
        ...
