"""Franka Panda + Panda gripper, from robosuite's MIT-licensed model files.

The files in ``sim/assets`` are robosuite 1.5.2's ``robots/panda/robot.xml`` and
``grippers/panda_gripper.xml`` unmodified, with the collision meshes only (the detailed visual OBJ meshes
are 37 MB and render ~6x slower on a CPU). We draw the collision meshes as the visuals. If
``VLA_ROBOSUITE_ASSETS`` points at robosuite's ``models/assets`` folder, the arm is loaded from there.

Changes made in code (robosuite does these in its own controller/base files): radians, position
actuators with gravity compensation (the shipped arm has torque motors), one gripper actuator with the
fingers coupled by an equality, and faster fingers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

ASSETS = Path(__file__).resolve().parent.parent / "assets"

ARM_JOINTS = tuple(f"joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("finger_joint1", "finger_joint2")


@dataclass(frozen=True)
class RobotInfo:
    """What the env and the expert need to know about an arm (mirrors a hardware profile)."""

    name: str
    prefix: str
    arm_joints: tuple[str, ...]
    finger_joints: tuple[str, ...]
    gripper_range: tuple[float, float]  # finger joint position: closed, open (m)
    home: tuple[float, ...]
    grip_site: str
    wrist_camera: str
    kp: tuple[float, ...] = (4500, 4500, 3500, 3500, 2000, 2000, 2000)
    force_limit: tuple[float, ...] = (87, 87, 87, 87, 12, 12, 12)
    arm_bodies: tuple[str, ...] = field(default=tuple(f"link{i}" for i in range(1, 8)))

    def joint(self, name: str) -> str:
        return self.prefix + name

    @property
    def action_dim(self) -> int:
        return len(self.arm_joints) + 1


PANDA = RobotInfo(
    name="panda",
    prefix="robot/",
    arm_joints=ARM_JOINTS,
    finger_joints=FINGER_JOINTS,
    gripper_range=(0.0, 0.04),
    home=(0.0, 0.1, 0.0, -2.2, 0.0, 2.3, 0.785),
    grip_site="grip_site",
    wrist_camera="eye_in_hand",
)


def set_damping(joint: mujoco.MjsJoint, value: float) -> None:
    """Set joint damping on MuJoCo versions where it is a scalar or a [3] polynomial."""
    if np.ndim(joint.damping) == 0:
        joint.damping = value
    else:
        joint.damping = [value, 0.0, 0.0]


def _arm_file() -> Path:
    custom = os.environ.get("VLA_ROBOSUITE_ASSETS")
    if custom:
        return Path(custom) / "robots" / "panda" / "robot.xml"
    return ASSETS / "panda" / "robot.xml"


def _load_arm() -> mujoco.MjSpec:
    spec = mujoco.MjSpec.from_file(str(_arm_file()))
    spec.compiler.degree = False
    for g in list(spec.geoms):
        if g.meshname.endswith(tuple(f"_{i}" for i in range(20))) or g.meshname.endswith("_vis"):
            spec.delete(g)  # detailed visual meshes (absent from the vendored copy)
    for m in list(spec.meshes):
        if "_vis" in m.name:
            spec.delete(m)
    for a in list(spec.actuators):
        spec.delete(a)
    for g in spec.geoms:  # collision meshes double as visuals: group 0 is drawn
        g.rgba = [0.92, 0.92, 0.93, 1.0] if "link" in g.name else g.rgba
    spec.cameras  # noqa: B018  (robotview stays; unused)
    return spec


def _load_gripper() -> mujoco.MjSpec:
    spec = mujoco.MjSpec.from_file(str(ASSETS / "panda_gripper" / "panda_gripper.xml"))
    spec.compiler.degree = False
    for a in list(spec.actuators):
        spec.delete(a)
    for s in list(spec.sensors):
        spec.delete(s)
    for site in spec.sites:
        site.group = 4  # markers hidden from cameras
    for j in spec.joints:
        if j.name in FINGER_JOINTS:
            set_damping(j, 10.0)
            j.armature = 0.01
            j.frictionloss = 0.1
    for g in spec.geoms:
        if g.name.endswith("_visual"):
            g.rgba = [0.3, 0.3, 0.32, 1.0] if "finger" in g.name else [0.95, 0.95, 0.95, 1.0]
        elif g.name in ("finger1_collision", "finger2_collision", "hand_collision"):
            g.group = 3  # collision-only: the visual STLs are drawn instead
    return spec


def attach_panda(world: mujoco.MjSpec, pos=(0.0, 0.0, 0.0), robot: RobotInfo = PANDA) -> None:
    """Attach the arm + gripper to ``world`` at ``pos`` with position actuators.

    Actuators (in order): 7 arm joints, then one gripper actuator whose control is the finger joint
    position in [closed, open] = ``robot.gripper_range``.
    """
    arm = _load_arm()
    gripper = _load_gripper()
    hand = arm.body("right_hand")
    site = hand.add_site(name="gripper_mount")
    site.attach_body(gripper.body("right_gripper"), "gripper/", "")
    frame = world.worldbody.add_frame(pos=list(pos))
    frame.attach_body(arm.body("base"), robot.prefix, "")

    p = robot.prefix
    for b in (*robot.arm_bodies, "right_hand"):
        world.body(p + b).gravcomp = 1.0
    for b in ("right_gripper", "leftfinger", "rightfinger", "eef", "finger_joint1_tip", "finger_joint2_tip"):
        world.body(p + "gripper/" + b).gravcomp = 1.0
    for name, kp, flim in zip(robot.arm_joints, robot.kp, robot.force_limit, strict=True):
        j = world.joint(p + name)
        j.armature = 0.1
        set_damping(j, 5.0)
        act = world.add_actuator(name=p + "act_" + name, target=p + name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=kp, kv=0.1 * kp)
        act.ctrlrange = world.joint(p + name).range
        act.ctrllimited = 1
        act.forcerange = [-flim, flim]
        act.forcelimited = 1
    f1, f2 = (p + "gripper/" + n for n in robot.finger_joints)
    eq = world.add_equality(type=mujoco.mjtEq.mjEQ_JOINT, name1=f2, name2=f1)
    eq.data[:5] = [0.0, -1.0, 0.0, 0.0, 0.0]
    g = world.add_actuator(name=p + "act_gripper", target=f1, trntype=mujoco.mjtTrn.mjTRN_JOINT)
    g.set_to_position(kp=300.0, kv=20.0)
    g.ctrlrange = list(robot.gripper_range)
    g.ctrllimited = 1
    g.forcerange = [-30.0, 30.0]
    g.forcelimited = 1


def grip_site_name(robot: RobotInfo = PANDA) -> str:
    return robot.prefix + "gripper/" + robot.grip_site


def wrist_camera_name(robot: RobotInfo = PANDA) -> str:
    return robot.prefix + robot.wrist_camera


def arm_qpos_adr(model: mujoco.MjModel, robot: RobotInfo = PANDA) -> np.ndarray:
    return np.array([model.jnt_qposadr[model.joint(robot.prefix + j).id] for j in robot.arm_joints])


def finger_qpos_adr(model: mujoco.MjModel, robot: RobotInfo = PANDA) -> np.ndarray:
    return np.array(
        [model.jnt_qposadr[model.joint(robot.prefix + "gripper/" + j).id] for j in robot.finger_joints]
    )
