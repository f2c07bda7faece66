"""TheRobotStudio SO-101 (follower arm) with its servo gripper, as LeRobot drives it.

Sources:
- Kinematics and position limits: TheRobotStudio/SO-ARM100 ``Simulation/SO101/so101_new_calib.urdf`` @ 385e8d7
  (2025-07-02, github.com/TheRobotStudio/SO-ARM100), the URDF the repo publishes for LeRobot's (new)
  calibration. Joint origins and limits copied as published (rad).
- Speed: every joint is a Feetech STS3215 (the follower uses the 7.4 V, 1/345 version, C001, fed from 5 V:
  SO-ARM100 README). Feetech's own datasheet is not in our reference store; the figures resellers reproduce
  from it are 0.238 s/60 deg at 6 V and 0.192 s/60 deg at 7.4 V (DFRobot SER0069 page), 0.222 s/60 deg for
  the 12 V version. We use the 6 V figure, the nearest to the 5 V supply: 60 deg / 0.238 s = 4.40 rad/s.
- Acceleration: the STS3215 datasheet gives no limit. The servo ramps at its ``Acceleration`` register
  (address 41, 0-254), which LeRobot sets to 254 (``FeetechMotorsBus.configure_motors``); in Feetech's STS
  memory table one unit is 100 steps/s^2 at 4096 steps/rev (not verifiable in our reference store), so
  254 units = 254 * 100 * 2 pi / 4096 = 39 rad/s^2, the fastest ramp the servo itself will command.
- Gripper: LeRobot reports and commands the gripper servo as 0..100 (percent open, ``RANGE_0_100``). Its
  speed in %/s: the same servo speed over the URDF gripper joint's travel (-0.174533..1.74533 rad).
"""

from __future__ import annotations

import math

from hardware.profiles.registry import PROFILES
from vla.kinematics import Pose, URDFChain, URDFJoint
from vla.robot import CameraSpec, GripperModel, JointLimits, RobotProfile, Workspace

STS3215_SPEED = math.radians(60.0) / 0.238  # rad/s, 6 V no-load
STS3215_ACCELERATION = 254 * 100 * 2 * math.pi / 4096  # rad/s^2, the servo's maximum ramp
GRIPPER_TRAVEL = 1.74533 - (-0.174533)  # rad, URDF gripper joint

SO101_LIMITS = JointLimits(
    lower=(-1.91986, -1.74533, -1.69, -1.65806, -2.74385),
    upper=(1.91986, 1.74533, 1.69, 1.65806, 2.84121),
    max_velocity=(STS3215_SPEED,) * 5,
    max_acceleration=(STS3215_ACCELERATION,) * 5,
)

# URDF joints shoulder_pan .. wrist_roll (origin xyz, rpy; axis z), then the fixed gripper_frame_joint
SO101_KINEMATICS = URDFChain(
    joints=(
        URDFJoint(Pose((0.0388353, -8.97657e-09, 0.0624), (3.14159, 4.18253e-17, -3.14159))),
        URDFJoint(Pose((-0.0303992, -0.0182778, -0.0542), (-1.5708, -1.5708, 0.0))),
        URDFJoint(Pose((-0.11257, -0.028, 1.73763e-16), (-3.63608e-16, 8.74301e-16, 1.5708))),
        URDFJoint(Pose((-0.1349, 0.0052, 3.62355e-17), (4.02456e-15, 8.67362e-16, -1.5708))),
        URDFJoint(Pose((5.55112e-17, -0.0611, 0.0181), (1.5708, 0.0486795, 3.14159))),
    ),
    tool=Pose((-0.0079, -0.000218121, -0.0981274), (0.0, 3.14159, 0.0)),
)

# A default box from the arm's reach (tool point at most ~0.48 m from the pan axis) in front of the base and
# above the surface it is clamped to (z = 0: the URDF base_link origin); an installation overrides it.
SO101_WORKSPACE = Workspace(lower=(0.0, -0.45, 0.0), upper=(0.5, 0.45, 0.45))

SO101 = RobotProfile(
    name="so101",
    joints=("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll"),  # LeRobot's names
    limits=SO101_LIMITS,
    gripper=GripperModel(closed=0.0, open=100.0, max_speed=100.0 * STS3215_SPEED / GRIPPER_TRAVEL, units="%"),
    control_hz=30.0,  # LeRobot records SO-101 datasets at 30 fps
    cameras=(CameraSpec("front"), CameraSpec("wrist")),
    # ready: upper arm raised, forearm level, wrist tilted down; tool ~0.26 m in front, ~0.12 m up
    home=(0.0, -1.0, 1.0, 0.5, 0.0),
    workspace=SO101_WORKSPACE,
    kinematics=SO101_KINEMATICS,
    description="TheRobotStudio SO-101 follower (Feetech STS3215 servos), LeRobot conventions",
)
PROFILES.register("so101")(SO101)
