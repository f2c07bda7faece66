"""Robot profiles: what the runtime's safety layer and the ROS 2 node need to know about an arm."""

from __future__ import annotations

from dataclasses import dataclass

from vla.registry import Registry
from vla.runtime.safety import JointLimits


@dataclass(frozen=True)
class RobotProfile:
    name: str
    joints: tuple[str, ...]  # action dimensions, in order (arm joints, then the gripper)
    limits: JointLimits
    control_hz: float
    cameras: tuple[str, ...]


PROFILES: Registry[RobotProfile] = Registry("robot profile")

# Franka Emika Panda (datasheet joint ranges and velocity limits; acceleration limits reduced from the
# datasheet's 15 / 7.5 / 10 / 12.5 / 15 / 20 / 20 rad/s^2 to 10 rad/s^2 for policy commands) plus the
# gripper finger position (m).
PANDA = RobotProfile(
    name="panda",
    joints=tuple(f"joint{i}" for i in range(1, 8)) + ("gripper",),
    limits=JointLimits(
        lower=[-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973, 0.0],
        upper=[2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973, 0.04],
        max_velocity=[2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61, 0.2],
        max_acceleration=[10.0] * 7 + [10.0],
    ),
    control_hz=10.0,
    cameras=("agentview", "wrist"),
)
PROFILES.register("panda")(PANDA)
