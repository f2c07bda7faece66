"""Franka Research 3 (FR3) with the Franka Hand: Panda kinematics (the same DH table), its own limits.

Sources:
- Joint limits q, dq, ddq: Franka Control Interface (FCI) documentation, "Robot and interface
  specifications", section "Limits for Franka Research 3",
  https://frankaemika.github.io/docs/control_parameters.html (docs source github.com/frankaemika/docs
  @ 1da6bd3, 2025-08-14; table ``source/control-parameters-joint-fr3.csv``, 2022-08-25). The successor page
  (https://frankarobotics.github.io/docs/robot_specifications.html, "Limits for Franka Research 3 (FR3)")
  lists wider position limits (e.g. joint 1 +-2.9007, joint 6 0.4398..4.6216) with position-dependent
  velocity limits near them; we keep the narrower table, which lies inside the new one. The velocities are
  the FCI maxima; FCI notes the real limit shrinks near the position limits.
- Kinematics: the FCI DH table is the same for FR3 and Panda (see ``hardware/profiles/panda.py``).
"""

from __future__ import annotations

from hardware.profiles.panda import FRANKA_HAND, FRANKA_KINEMATICS, PANDA_WORKSPACE
from hardware.profiles.registry import PROFILES
from vla.robot import CameraSpec, JointLimits, RobotProfile

FR3_LIMITS = JointLimits(
    lower=(-2.7437, -1.7837, -2.9007, -3.0421, -2.8065, 0.5445, -3.0159),
    upper=(2.7437, 1.7837, 2.9007, -0.1518, 2.8065, 4.5169, 3.0159),
    max_velocity=(2.62, 2.62, 2.62, 2.62, 5.26, 4.18, 5.26),
    max_acceleration=(10.0,) * 7,
)

FR3 = RobotProfile(
    name="fr3",
    joints=tuple(f"joint{i}" for i in range(1, 8)),  # as in the MuJoCo model (fr3_joint1.. in franka_ros2)
    limits=FR3_LIMITS,
    gripper=FRANKA_HAND,
    control_hz=10.0,  # our sim and policies run at 10 Hz
    cameras=(CameraSpec("agentview"), CameraSpec("wrist")),
    home=(0.0, 0.1, 0.0, -2.2, 0.0, 2.3, 0.785),  # the Panda sim's start pose, inside FR3's limits too
    workspace=PANDA_WORKSPACE,
    kinematics=FRANKA_KINEMATICS,
    description="Franka Research 3 + Franka Hand",
)
PROFILES.register("fr3")(FR3)
