"""LeRobot's robots (``lerobot.robots``: SO-101, Koch, ...) as our :class:`~vla.robot.Robot`: one adapter.

:class:`LeRobotRobot` wraps any connected ``lerobot.robots.Robot`` and one of our profiles. It translates
names and units only (:class:`LeRobotJointMap`): LeRobot's flat ``{"<joint>.pos": deg, "gripper.pos": 0..100,
"<camera>": uint8 [H, W, 3]}`` dicts to :class:`~vla.robot.Observation`, and our actions (rad, the gripper in
the profile's units) back to ``send_action``. The driver (bus, calibration, cameras) stays LeRobot's.

LeRobot's joint motors report degrees only in ``MotorNormMode.DEGREES``; the default normalised mode
(``RANGE_M100_100``: -100..100 over the calibrated range) cannot be turned into radians without the
calibration, so it is refused: configure the robot with ``use_degrees=True``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from lerobot.motors import MotorNormMode

from vla.robot import Capabilities, EpisodeStatus, Observation, RobotProfile

if TYPE_CHECKING:
    from lerobot.robots import Robot as LeRobotDevice


@dataclass(frozen=True)
class LeRobotJointMap:
    """Names and units of a profile's joints and gripper on a LeRobot device (robot or leader arm).

    ``profile joint = sign * radians(device value) + offset`` (``units="rad"``: no conversion). The gripper
    is mapped linearly: ``gripper_range`` are the device values at the profile gripper's (closed, open); None
    when the device already speaks the profile's units (the SO-101 profile's gripper is LeRobot's 0..100).
    """

    joint_keys: tuple[str, ...]  # per profile joint, in profile order: the LeRobot key
    gripper_key: str | None = "gripper.pos"  # None: the profile has no gripper
    units: Literal["deg", "rad"] = "deg"
    offsets: tuple[float, ...] = ()  # rad, per joint (() = zeros): profile zero vs the device's calibration
    signs: tuple[float, ...] = ()  # +1 / -1 per joint (() = all +1)
    gripper_range: tuple[float, float] | None = None  # device values at the profile's (closed, open)
    # profile camera name -> LeRobot observation key (a camera not named here: the same name)
    camera_keys: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.joint_keys)
        for name in ("offsets", "signs"):
            if getattr(self, name) and len(getattr(self, name)) != n:
                raise ValueError(
                    f"LeRobotJointMap.{name}: {len(getattr(self, name))} values for {n} joint_keys"
                )
        if self.units not in ("deg", "rad"):
            raise ValueError(f"LeRobotJointMap.units={self.units!r}: use 'deg' or 'rad'")
        if self.gripper_range is not None and self.gripper_range[0] == self.gripper_range[1]:
            raise ValueError(
                f"LeRobotJointMap.gripper_range={self.gripper_range}: closed must differ from open"
            )

    @classmethod
    def for_profile(cls, profile: RobotProfile, **overrides: Any) -> LeRobotJointMap:
        """LeRobot's naming for ``profile``: ``<joint>.pos`` per joint, ``gripper.pos`` (when it has one)."""
        keys = tuple(f"{j}.pos" for j in profile.joints)
        overrides.setdefault("gripper_key", "gripper.pos" if profile.gripper is not None else None)
        return cls(joint_keys=keys, **overrides)

    @property
    def keys(self) -> tuple[str, ...]:
        return self.joint_keys + ((self.gripper_key,) if self.gripper_key else ())

    def check(self, profile: RobotProfile) -> None:
        """Raise if this map does not fit ``profile`` (joint count, gripper presence)."""
        if len(self.joint_keys) != profile.arm_dim:
            raise ValueError(
                f"LeRobotJointMap.joint_keys has {len(self.joint_keys)} keys; profile {profile.name} has "
                f"{profile.arm_dim} joints {profile.joints}"
            )
        if (self.gripper_key is None) != (profile.gripper is None):
            raise ValueError(
                f"LeRobotJointMap.gripper_key={self.gripper_key!r} but profile {profile.name} "
                f"{'has no' if profile.gripper is None else 'has a'} gripper"
            )

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.joint_keys)
        return np.asarray(self.signs or (1.0,) * n), np.asarray(self.offsets or (0.0,) * n)

    def _gripper_affine(self, profile: RobotProfile) -> tuple[float, float]:
        """(scale, shift): profile gripper = scale * device value + shift."""
        if self.gripper_range is None or profile.gripper is None:
            return 1.0, 0.0
        (d0, d1), (p0, p1) = self.gripper_range, (profile.gripper.closed, profile.gripper.open)
        scale = (p1 - p0) / (d1 - d0)
        return scale, p0 - scale * d0

    def decode(self, values: Mapping[str, Any], profile: RobotProfile) -> np.ndarray:  # [J (+1)]
        """Device values -> our vector: joints in rad, then the gripper in the profile's units."""
        sign, offset = self._arrays()
        raw = np.array([float(values[k]) for k in self.joint_keys])
        q = sign * (np.radians(raw) if self.units == "deg" else raw) + offset
        if self.gripper_key is None:
            return q
        scale, shift = self._gripper_affine(profile)
        return np.r_[q, scale * float(values[self.gripper_key]) + shift]

    def encode(self, action: np.ndarray, profile: RobotProfile) -> dict[str, float]:
        """Our vector [J (+1)] -> the device's ``{key: value}`` (the inverse of :meth:`decode`)."""
        sign, offset = self._arrays()
        n = len(self.joint_keys)
        q = (np.asarray(action[:n], dtype=np.float64) - offset) / sign
        raw = np.degrees(q) if self.units == "deg" else q
        out = {k: float(v) for k, v in zip(self.joint_keys, raw, strict=True)}
        if self.gripper_key is not None:
            scale, shift = self._gripper_affine(profile)
            out[self.gripper_key] = (float(action[n]) - shift) / scale
        return out


def require_keys(what: str, features: Mapping[str, Any], keys: Iterable[str]) -> None:
    """Raise naming the ``keys`` missing from ``features`` (a LeRobot features dict) and the ones there."""
    missing = [k for k in keys if k not in features]
    if missing:
        raise ValueError(
            f"{what} lacks {missing}; available: {sorted(features)}. Map the profile onto these keys with "
            "LeRobotJointMap(joint_keys=..., gripper_key=..., camera_keys=...)"
        )


def check_degrees(device: Any, joint_keys: Iterable[str]) -> None:
    """Refuse a LeRobot device whose joint motors are not in ``MotorNormMode.DEGREES``.

    Read from the device's motor bus (``device.bus.motors[name].norm_mode``, as SO-101 and Koch have) or,
    without one, its config's ``use_degrees``. A device exposing neither is trusted.
    """
    motors = getattr(getattr(device, "bus", None), "motors", None)
    bad: dict[str, str] = {}
    if isinstance(motors, Mapping):
        for key in joint_keys:
            motor = motors.get(key.removesuffix(".pos"))
            if motor is not None and motor.norm_mode != MotorNormMode.DEGREES:
                bad[key] = MotorNormMode(motor.norm_mode).name
    elif getattr(getattr(device, "config", None), "use_degrees", True) is False:
        bad = dict.fromkeys(joint_keys, "use_degrees=False")
    if bad:
        raise ValueError(
            f"{device}: joints {bad} are not in degrees. A normalised range (RANGE_M100_100) cannot be "
            "converted to radians without the motor calibration: configure the robot with use_degrees=True"
        )


class LeRobotRobot:
    """A connected ``lerobot.robots.Robot`` as our :class:`~vla.robot.Robot`; see the module docstring.

    Args:
        device: The LeRobot robot (connected before the episode: its own ``connect()`` and calibration).
        profile: Our profile of the arm (joint names and order, limits, gripper, control rate, cameras).
        mapping: Names and units on the device; default :meth:`LeRobotJointMap.for_profile`.
        instruction: The task text observations carry.

    ``reset()`` moves nothing (a real arm starts the episode where it is); ``status()`` does not know success
    and is never done (an operator's stop ends the episode). No joint velocities are measured.
    """

    profile: RobotProfile
    capabilities: Capabilities

    def __init__(
        self,
        device: LeRobotDevice,
        profile: RobotProfile,
        mapping: LeRobotJointMap | None = None,
        *,
        instruction: str = "",
    ) -> None:
        self.device, self.profile, self.instruction = device, profile, instruction
        self.mapping = mapping or LeRobotJointMap.for_profile(profile)
        self.mapping.check(profile)
        self.capabilities = Capabilities(realtime=True)
        self.camera_keys = {c: self.mapping.camera_keys.get(c, c) for c in profile.camera_names}
        name = type(device).__name__
        require_keys(f"{name}.action_features", device.action_features, self.mapping.keys)
        require_keys(
            f"{name}.observation_features",
            device.observation_features,
            [*self.mapping.keys, *self.camera_keys.values()],
        )
        if self.mapping.units == "deg":
            check_degrees(device, self.mapping.joint_keys)
        self.read_s = math.nan  # how long the last get_observation() took
        self._obs: Observation | None = None
        self._gripper_cmd: float | None = None
        self._hold: np.ndarray | None = None

    def now(self) -> float:
        return time.monotonic()

    def observe(self) -> Observation:
        """Read ``get_observation()``; joints and images are stamped with the time the call returned.

        LeRobot's cameras do not expose capture timestamps (``read_latest`` returns the newest buffered frame,
        refusing only frames older than its ``max_age_ms``), so the read time is an upper bound on freshness:
        every value was captured no later than its stamp, a camera frame possibly earlier.
        """
        t0 = time.monotonic()
        raw = self.device.get_observation()
        t = time.monotonic()
        self.read_s = t - t0
        state = self.mapping.decode(raw, self.profile)
        n = self.profile.arm_dim
        self._obs = Observation(
            joints=state[:n],
            joint_stamp=t,
            gripper=float(state[n]) if self.profile.gripper is not None else None,
            images={c: np.asarray(raw[k]) for c, k in self.camera_keys.items()},
            image_stamps=dict.fromkeys(self.camera_keys, t),
            instruction=self.instruction,
        )
        return self._obs

    def command(self, action: np.ndarray) -> None:
        """``send_action`` of ``action`` [J (+1)] (rad, the profile's gripper units) in the device's units."""
        self._hold = None
        self._send(np.asarray(action, dtype=np.float64))

    def hold(self) -> None:
        """Send the joints measured when the hold began and the last gripper command (the measured gripper
        if none was sent). Latched until the next ``command``: re-reading the measured position every period
        would let a loaded arm creep."""
        if self._hold is None:
            obs = self._obs if self._obs is not None else self.observe()
            gripper = self._gripper_cmd if self._gripper_cmd is not None else obs.gripper
            self._hold = np.r_[obs.joints, [] if gripper is None else [gripper]]
        self._send(self._hold)

    def reset(self, seed: int | None = None) -> None:
        """Start an episode where the arm is: nothing moves (``seed`` is ignored); the hold latch and the
        remembered gripper command are cleared."""
        self._obs, self._gripper_cmd, self._hold = None, None, None

    def status(self) -> EpisodeStatus:
        return EpisodeStatus(success=None, done=False)

    def _send(self, action: np.ndarray) -> None:
        if action.shape != (self.profile.action_dim,) or not np.all(np.isfinite(action)):
            raise ValueError(
                f"{self.profile.name}: action must be {self.profile.action_dim} finite values "
                f"{self.profile.action_names}, got {action}"
            )
        self.device.send_action(self.mapping.encode(action, self.profile))
        if self.profile.gripper is not None:
            self._gripper_cmd = float(action[-1])
