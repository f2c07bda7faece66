"""LeRobot's ``Robot`` and ``Teleoperator`` classes behind our protocols (:mod:`vla.robot`).

- :class:`LeRobotRobot` (``hardware/lerobot_robot.py``): any connected ``lerobot.robots.Robot`` plus one of
  our profiles, through a typed name/unit map (:class:`LeRobotJointMap`);
- :class:`LeRobotTeleop` (``hardware/lerobot_teleop.py``): a ``lerobot.teleoperators.Teleoperator`` (leader
  arm, gamepad, keyboard) as a source of commands plus an engaged signal.

The sim side of a person at a desk taking over a sim rollout is ``sim/teleop_devices.py``.
"""

from __future__ import annotations

from hardware.lerobot_robot import LeRobotJointMap, LeRobotRobot, check_degrees, require_keys
from hardware.lerobot_teleop import (
    EEToJoints,
    GripperCommand,
    LeRobotTeleop,
    LeRobotTeleopConfig,
    gripper_command,
)

__all__ = [
    "EEToJoints",
    "GripperCommand",
    "LeRobotJointMap",
    "LeRobotRobot",
    "LeRobotTeleop",
    "LeRobotTeleopConfig",
    "check_degrees",
    "gripper_command",
    "require_keys",
]
