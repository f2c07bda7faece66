"""Franka Emika Panda (FER) with the Franka Hand: the arm our MuJoCo sim models (``sim/robots/panda.py``
builds its joint ranges, actuator ranges, gripper range and start pose from this profile).

Sources:
- Joint limits q, dq, ddq: Franka Control Interface (FCI) documentation, "Robot and interface
  specifications", section "Limits for Panda", https://frankaemika.github.io/docs/control_parameters.html
  (docs source github.com/frankaemika/docs @ 1da6bd3, 2025-08-14; table
  ``source/control-parameters-joint-panda.csv``, last changed 2022-08-25). The successor page, "Control
  Interface Specification and Robot Limits" > "Limits for Franka Emika Robot (FER)",
  https://frankarobotics.github.io/docs/robot_specifications.html, lists the same values.
- Kinematics: same page, "Denavit-Hartenberg parameters" (Craig's convention = modified DH), flange
  d = 0.107 m.
- Franka Hand: finger travel 0..0.04 m per finger (franka_description ``franka_hand.xacro``, finger joints
  lower=0.0 upper=0.04, github.com/frankaemika/franka_ros). Speed: the Franka Hand datasheet's figure was not
  found in our reference store; we use 0.05 m/s per finger = 0.1 m/s of opening width, the most that
  libfranka-based tools command (frankx ``Gripper::max_speed = 0.1 m/s``, pantor.github.io/frankx).
"""

from __future__ import annotations

import math

from hardware.profiles.registry import PROFILES
from vla.kinematics import DHChain, Pose
from vla.robot import CameraSpec, GripperModel, JointLimits, RobotProfile, Workspace

# FCI "Limits for Panda": q_min / q_max (rad), dq_max (rad/s), ddq_max (rad/s^2), the datasheet's values (no
# lower acceleration cap for policy commands).
PANDA_LIMITS = JointLimits(
    lower=(-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973),
    upper=(2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973),
    max_velocity=(2.1750, 2.1750, 2.1750, 2.1750, 2.6100, 2.6100, 2.6100),
    max_acceleration=(15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0),
)

# FCI DH table (modified DH: each row is a_{i-1}, d_i, alpha_{i-1}); the same for Panda and FR3.
# Tool: the sim's grip site, 0.2035 m along the joint-7 z axis (robosuite mounts the hand 0.1065 m from the
# joint-7 frame -- Franka's flange is at 0.107 -- and puts grip_site 0.097 m further, between the fingertips;
# Franka's own Franka Hand TCP is 0.1034 m past the flange, 0.2104 m in all). Rotation: the sim gripper
# frame, -135 deg about z (robosuite's hand -45 deg, its gripper mount another -90 deg).
FRANKA_KINEMATICS = DHChain(
    a=(0.0, 0.0, 0.0, 0.0825, -0.0825, 0.0, 0.088),
    d=(0.333, 0.0, 0.316, 0.0, 0.384, 0.0, 0.0),
    alpha=(0.0, -math.pi / 2, math.pi / 2, math.pi / 2, -math.pi / 2, math.pi / 2, math.pi / 2),
    convention="modified",
    tool=Pose(xyz=(0.0, 0.0, 0.2035), rpy=(0.0, 0.0, -3 * math.pi / 4)),
)

FRANKA_HAND = GripperModel(closed=0.0, open=0.04, max_speed=0.05, units="m")  # per-finger position

# The tool-point box (m, base frame), sized from where the scripted experts take the tool: all five sim tasks,
# 20 seeds each, every reached grip-site position and the FK of every commanded arm target
# (``python tests/hardware/expert_reach.py 20``). Measured extremes:
#   x 0.338 .. 0.637 (push reaches nearest, reach farthest)   y -0.247 .. 0.249 (pick_place)
#   z 0.0199 (pick_place, stack, drawer: grasping 2 cm above the table) .. 0.294 (reach)
# Margin 5 cm on x, y and the top. The floor, z = 0.01, is 1 cm below the lowest expert point and is where
# the hand meets the table: the finger meshes reach 1.3 cm past the grip site (sim model, hand pointing
# down), so a target below the floor would press the fingers into the table top (z = 0).
PANDA_WORKSPACE = Workspace(lower=(0.29, -0.30, 0.01), upper=(0.69, 0.30, 0.35))

PANDA = RobotProfile(
    name="panda",
    joints=tuple(f"joint{i}" for i in range(1, 8)),  # as in the MuJoCo model
    limits=PANDA_LIMITS,
    gripper=FRANKA_HAND,
    control_hz=10.0,  # our sim and policies run at 10 Hz
    cameras=(CameraSpec("agentview"), CameraSpec("wrist")),
    home=(0.0, 0.1, 0.0, -2.2, 0.0, 2.3, 0.785),  # the pose the sim starts every episode at
    workspace=PANDA_WORKSPACE,
    kinematics=FRANKA_KINEMATICS,
    description="Franka Emika Panda (FER) + Franka Hand; the MuJoCo sim arm",
)
PROFILES.register("panda")(PANDA)
