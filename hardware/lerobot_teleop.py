"""LeRobot's teleoperators (``lerobot.teleoperators``: leader arms, gamepad, keyboard) as our
:class:`~vla.robot.Teleoperator`: a source of commands plus an "engaged" signal, wrapped, not re-written.

Two kinds of command (:class:`LeRobotTeleopConfig.kind`):

- ``joints``: a leader arm. ``get_action()`` gives ``<joint>.pos`` (degrees) and ``gripper.pos``, mapped to
  our action by the same :class:`~hardware.lerobot_robot.LeRobotJointMap` a follower uses.
- ``ee_delta``: end-effector teleop (gamepad, ``keyboard_ee``). ``get_action()`` gives ``delta_x/y/z`` and
  ``gripper`` (LeRobot's ``GripperAction``: 0 close, 1 stay, 2 open); the deltas, scaled to metres, go through
  an injected :class:`EEToJoints` (the Cartesian-to-joint map depends on the robot: ``sim/teleop_devices.py``
  has the sim Panda's).

Engaged: the device's ``get_teleop_events()[TeleopEvents.IS_INTERVENTION]`` (the gamepad's intervention
button, the keyboard's movement keys) when it has ``get_teleop_events``; otherwise the person is always in
control while the wrapper is in use (a leader arm). Each period the device is read as LeRobot's own loop reads
it: ``get_action()``, then ``get_teleop_events()`` (the keyboard's events depend on that order). The last
events stay in :attr:`LeRobotTeleop.events` (``TERMINATE_EPISODE``, ``SUCCESS`` for a ``stop`` callback).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
from lerobot.teleoperators.utils import TeleopEvents

from hardware.lerobot_robot import LeRobotJointMap, check_degrees, require_keys
from vla.robot import Observation, Robot, RobotProfile

if TYPE_CHECKING:
    from lerobot.teleoperators import Teleoperator as LeRobotTeleoperator

GripperCommand = Literal["close", "stay", "open"]
DELTA_KEYS = ("delta_x", "delta_y", "delta_z")


class EEToJoints(Protocol):
    """``(obs, delta_xyz [3] m, gripper command) -> action [J (+1)]`` for one robot. A map that keeps
    state (the tool target between periods) may define ``reset(obs)``, called when each takeover starts."""

    def __call__(self, obs: Observation, delta_xyz: np.ndarray, gripper: GripperCommand) -> np.ndarray: ...


@dataclass
class LeRobotTeleopConfig:
    """How a LeRobot teleoperator drives our robot."""

    kind: Literal["joints", "ee_delta"] = "joints"
    # "events": the device's IS_INTERVENTION event; "always": in control whenever used (a leader arm);
    # "auto": "events" when the device has get_teleop_events, else "always"
    engage: Literal["auto", "events", "always"] = "auto"
    delta_scale: float = 0.01  # m of tool motion per unit of delta_x/y/z, per control period (ee_delta)

    def __post_init__(self) -> None:
        if self.kind not in ("joints", "ee_delta"):
            raise ValueError(
                f"teleop kind={self.kind!r}: use 'joints' (leader arm) or 'ee_delta' (gamepad, keyboard)"
            )
        if self.engage not in ("auto", "events", "always"):
            raise ValueError(f"teleop engage={self.engage!r}: use 'auto', 'events' or 'always'")
        if not self.delta_scale > 0:
            raise ValueError(f"teleop delta_scale={self.delta_scale} must be > 0 (m per unit)")


def gripper_command(value: Any) -> GripperCommand:
    """LeRobot's ``GripperAction`` value (0 close, 1 stay, 2 open; missing: stay) as a command. The keyboard
    reports -1 when the close key is released: below 0.5 is close."""
    if value is None:
        return "stay"
    v = float(value)
    return "close" if v < 0.5 else "open" if v > 1.5 else "stay"


class LeRobotTeleop:
    """A ``lerobot.teleoperators.Teleoperator`` as our :class:`~vla.robot.Teleoperator` (module docstring).

    Args:
        device: The LeRobot teleoperator (connected before the episode).
        profile: The profile of the robot it drives (action layout, units).
        cfg: Command kind, engage policy, delta scale.
        mapping: ``joints`` kind: names and units on the leader; default :meth:`LeRobotJointMap.for_profile`.
        ee_to_joints: ``ee_delta`` kind: the robot's Cartesian-to-joint map.
    """

    def __init__(
        self,
        device: LeRobotTeleoperator,
        profile: RobotProfile,
        cfg: LeRobotTeleopConfig | None = None,
        *,
        mapping: LeRobotJointMap | None = None,
        ee_to_joints: EEToJoints | None = None,
    ) -> None:
        self.device, self.profile = device, profile
        self.cfg = cfg = cfg or LeRobotTeleopConfig()
        self.mapping = mapping or LeRobotJointMap.for_profile(profile)
        self.ee_to_joints = ee_to_joints
        name = type(device).__name__
        features = device.action_features
        if cfg.kind == "joints":
            self.mapping.check(profile)
            require_keys(f"{name}.action_features", features, self.mapping.keys)
            if self.mapping.units == "deg":
                check_degrees(device, self.mapping.joint_keys)
        else:
            if ee_to_joints is None:
                raise ValueError(
                    "teleop kind='ee_delta' needs ee_to_joints (e.g. sim.teleop_devices.PandaEEMap)"
                )
            require_keys(f"{name}.action_features['names']", features.get("names", features), DELTA_KEYS)
        has_events = callable(getattr(device, "get_teleop_events", None))
        if cfg.engage == "events" and not has_events:
            raise ValueError(
                f"teleop engage='events': {name} has no get_teleop_events(); use engage='always'"
            )
        self.use_events = has_events and cfg.engage != "always"
        self.events: dict = {}
        self._raw: dict | None = None
        self._on = self._starting = False

    def reset(self, robot: Robot) -> None:
        self.events, self._raw = {}, None
        self._on = self._starting = False

    def engaged(self, obs: Observation) -> bool:
        """Read the device (``get_action``, then ``get_teleop_events``): is the person in control?"""
        self._raw = dict(self.device.get_action())
        on = True
        if self.use_events:
            self.events = dict(self.device.get_teleop_events())
            flag = self.events.get(
                TeleopEvents.IS_INTERVENTION, self.events.get(TeleopEvents.IS_INTERVENTION.value)
            )
            on = bool(flag)
        self._starting = on and not self._on
        self._on = on
        return on

    def terminate_requested(self) -> bool:
        """Whether the person ended the episode on the device (LeRobot's TERMINATE_EPISODE event): pass as
        ``stop=`` of :func:`vla.runtime.loop.run_episode`."""
        flag = self.events.get(
            TeleopEvents.TERMINATE_EPISODE, self.events.get(TeleopEvents.TERMINATE_EPISODE.value)
        )
        return bool(flag)

    def action(self, obs: Observation) -> np.ndarray:  # [J (+1)]
        """The device's command this period in our action units."""
        raw = self._raw if self._raw is not None else dict(self.device.get_action())
        self._raw = None
        if self.cfg.kind == "joints":
            return self.mapping.decode(raw, self.profile)
        assert self.ee_to_joints is not None
        if self._starting and callable(getattr(self.ee_to_joints, "reset", None)):
            self.ee_to_joints.reset(obs)  # type: ignore[attr-defined]
        self._starting = False
        delta = self.cfg.delta_scale * np.array([float(raw.get(k) or 0.0) for k in DELTA_KEYS])
        out = np.asarray(self.ee_to_joints(obs, delta, gripper_command(raw.get("gripper"))), dtype=np.float64)
        if out.shape != (self.profile.action_dim,):
            n = self.profile.action_dim
            raise ValueError(f"ee_to_joints returned shape {out.shape}; {self.profile.name} takes ({n},)")
        return out
