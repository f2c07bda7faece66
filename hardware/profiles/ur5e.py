"""Universal Robots UR5e with a Robotiq 2F-85 (the common gripper on it; UR ships none).

Sources:
- Position and velocity limits: UR5e User Manual (e-Series), technical specifications: working range
  +-360 deg on all six joints, maximum speed 180 deg/s on all joints (base, shoulder, elbow, wrists). The same
  numbers, citing "Universal Robots e-Series, User Manual, UR5e, Version 5.8", are in UR's ROS 2 description:
  github.com/UniversalRobots/Universal_Robots_ROS2_Description ``config/ur5e/joint_limits.yaml``. (That file
  narrows elbow_joint to +-180 deg for motion planners; the arm's own limit, used here, is +-360 deg.)
- Acceleration: UR publishes no joint acceleration limit ("Acceleration limits are not publicly available",
  joint_limits.yaml above). We use pi rad/s^2 (180 deg/s^2), the value that file sets for every joint for
  MoveIt's time-optimal trajectories: it is UR's own number for a planner, and it lets a 10 Hz policy reach
  full speed in 1 s. For comparison, URScript's ``movej(q, a=1.4, v=1.05)`` default (URScript Manual, Module
  motion, https://www.universal-robots.com/manuals/EN/HTML/SW5_25_1/Content/prod-scriptmanual/all_scripts/Module_otion.htm)
  is a program default, not a limit, and would fault ordinary policy motion.
- Kinematics: UR, "Parameters for calculations of kinematics and dynamics" (e-Series 5.1.0),
  https://www.universal-robots.com/how-tos-and-faqs/faq/ur-faq/parameters-for-calculations-of-kinematics-and-dynamics-45257/
  (standard DH). Positions are in UR's base frame (the controller's "Base"; ROS ``base``, which is
  ``base_link`` turned 180 deg about z). The tool point is the flange (``tool0``): an installation with a
  gripper sets ``tool`` to its TCP.
- Gripper: Robotiq 2F-85, stroke 0..0.085 m (opening width); speed up to 0.15 m/s (the 2F-85 & 2F-140
  Instruction Manual, section 6.1 Specifications, gives a 20-150 mm/s closing speed; the table itself was
  not retrievable from our reference store).
"""

from __future__ import annotations

import math

from hardware.profiles.registry import PROFILES
from vla.kinematics import DHChain
from vla.robot import CameraSpec, GripperModel, JointLimits, RobotProfile, Workspace

UR5E_LIMITS = JointLimits(
    lower=(-2 * math.pi,) * 6,
    upper=(2 * math.pi,) * 6,
    max_velocity=(math.pi,) * 6,  # 180 deg/s
    max_acceleration=(math.pi,) * 6,  # 180 deg/s^2, see above
)

UR5E_KINEMATICS = DHChain(
    a=(0.0, -0.425, -0.3922, 0.0, 0.0, 0.0),
    d=(0.1625, 0.0, 0.0, 0.1333, 0.0997, 0.0996),
    alpha=(math.pi / 2, 0.0, 0.0, math.pi / 2, -math.pi / 2, 0.0),
    convention="standard",
)

# A default box from the arm's reach (850 mm, UR5e datasheet) above its mounting plane; an installation
# overrides it with its own cell (table edges, fixtures, the gripper's length).
UR5E_WORKSPACE = Workspace(lower=(-0.85, -0.85, 0.0), upper=(0.85, 0.85, 1.0))

UR5E = RobotProfile(
    name="ur5e",
    joints=(  # as ros2_control (Universal_Robots_ROS2_Driver) names them
        "shoulder_pan_joint",
        "shoulder_lift_joint",
        "elbow_joint",
        "wrist_1_joint",
        "wrist_2_joint",
        "wrist_3_joint",
    ),
    limits=UR5E_LIMITS,
    gripper=GripperModel(closed=0.0, open=0.085, max_speed=0.15, units="m"),
    control_hz=10.0,
    cameras=(CameraSpec("front"), CameraSpec("wrist")),
    # the usual UR ready pose: elbow up, tool pointing down, ~0.5 m in front of and above the base
    home=(0.0, -math.pi / 2, math.pi / 2, -math.pi / 2, -math.pi / 2, 0.0),
    workspace=UR5E_WORKSPACE,
    kinematics=UR5E_KINEMATICS,
    description="Universal Robots UR5e + Robotiq 2F-85",
)
PROFILES.register("ur5e")(UR5E)
