"""Franka Panda + Panda gripper, from robosuite's MIT-licensed model files.

The files in ``sim/assets`` are robosuite 1.5.2's ``robots/panda/robot.xml`` and
``grippers/panda_gripper.xml`` unmodified, with the collision meshes only (the detailed visual OBJ meshes
are 37 MB and render ~6x slower on a CPU). We draw the collision meshes as the visuals.
``VLA_PANDA_MODEL`` picks another arm model: ``robosuite`` (an installed robosuite's detailed meshes, or
``VLA_ROBOSUITE_ASSETS=<robosuite>/models/assets``) or ``menagerie`` (``$MENAGERIE_ROOT``'s
``franka_emika_panda/panda_nohand.xml``). The gripper is always the vendored one.

Changes made in code (robosuite does these in its own controller/base files): radians, position
actuators with gravity compensation (the shipped arm has torque motors), one gripper actuator with the
fingers coupled by an equality, and faster fingers.

One source of truth: joint names, joint ranges (and so the actuator ranges and the env's action space),
the gripper range and the start pose come from the hardware profile (``hardware.profiles.panda``); only the
sim-only facts (MuJoCo names, gains, force limits) live here.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from hardware.profiles.panda import PANDA as PANDA_PROFILE
from vla.robot import RobotProfile

ASSETS = Path(__file__).resolve().parent.parent / "assets"

FINGER_JOINTS = ("finger_joint1", "finger_joint2")


@dataclass(frozen=True)
class RobotInfo:
    """The MuJoCo model of an arm: its hardware ``profile`` (joint names and limits, gripper, start pose) plus
    the sim-only facts (name prefix, sites, position-actuator gains and force limits)."""

    profile: RobotProfile
    prefix: str
    finger_joints: tuple[str, ...]
    grip_site: str
    wrist_camera: str
    kp: tuple[float, ...] = (4500, 4500, 3500, 3500, 2000, 2000, 2000)
    force_limit: tuple[float, ...] = (87, 87, 87, 87, 12, 12, 12)
    arm_bodies: tuple[str, ...] = field(default=tuple(f"link{i}" for i in range(1, 8)))

    def __post_init__(self) -> None:
        if self.profile.gripper is None:
            raise ValueError(
                f"sim arm {self.profile.name!r}: the profile needs a gripper (the sim has fingers)"
            )
        n = self.profile.arm_dim
        if len(self.kp) != n or len(self.force_limit) != n:
            raise ValueError(
                f"sim arm {self.profile.name!r}: kp and force_limit need {n} values (one per joint)"
            )

    def joint(self, name: str) -> str:
        return self.prefix + name

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def arm_joints(self) -> tuple[str, ...]:
        return self.profile.joints

    @property
    def joint_range(self) -> np.ndarray:  # [J, 2] rad
        return np.stack([self.profile.limits.lower, self.profile.limits.upper], axis=1)

    @property
    def gripper_range(self) -> tuple[float, float]:
        """Finger joint position: closed, open (m)."""
        g = self.profile.gripper
        assert g is not None
        return (g.closed, g.open)

    @property
    def home(self) -> tuple[float, ...]:
        return self.profile.home

    @property
    def action_dim(self) -> int:
        return self.profile.action_dim


PANDA = RobotInfo(
    profile=PANDA_PROFILE,
    prefix="robot/",
    finger_joints=FINGER_JOINTS,
    grip_site="grip_site",
    wrist_camera="eye_in_hand",
)


def set_damping(joint: mujoco.MjsJoint, value: float) -> None:
    """Set joint damping on MuJoCo versions where it is a scalar or a [3] polynomial."""
    if np.ndim(joint.damping) == 0:
        joint.damping = value
    else:
        joint.damping = [value, 0.0, 0.0]


ARM_MODELS = ("vendored", "robosuite", "menagerie")
ARM_MODEL_ENV = "VLA_PANDA_MODEL"


def arm_model() -> str:
    """Which Panda arm model to load: ``$VLA_PANDA_MODEL`` in :data:`ARM_MODELS` (default ``vendored``)."""
    name = os.environ.get(ARM_MODEL_ENV, "vendored")
    if name not in ARM_MODELS:
        raise ValueError(f"{ARM_MODEL_ENV}={name!r}; choose one of {ARM_MODELS}")
    return name


def _strip_actuators(spec: mujoco.MjSpec) -> mujoco.MjSpec:
    spec.compiler.degree = False
    for a in list(spec.actuators):
        spec.delete(a)
    return spec


def _vendored_arm() -> tuple[mujoco.MjSpec, str]:
    """robosuite's robot.xml with collision meshes only; they double as visuals (group 0 is drawn)."""
    spec = _strip_actuators(mujoco.MjSpec.from_file(str(ASSETS / "panda" / "robot.xml")))
    for g in list(spec.geoms):
        if g.meshname.startswith("link") and "_vis" in g.meshname:
            spec.delete(g)  # detailed visual meshes: not shipped in sim/assets
    for m in list(spec.meshes):
        if "_vis" in m.name:
            spec.delete(m)
    for g in spec.geoms:
        g.rgba = [0.92, 0.92, 0.93, 1.0]
    return spec, "base"


def _robosuite_arm() -> tuple[mujoco.MjSpec, str]:
    """The full-detail arm from an installed robosuite (or ``$VLA_ROBOSUITE_ASSETS``); renders ~6x slower."""
    root = os.environ.get("VLA_ROBOSUITE_ASSETS")
    if not root:
        found = importlib.util.find_spec("robosuite")
        if found is None or not found.submodule_search_locations:
            raise FileNotFoundError(
                f"{ARM_MODEL_ENV}=robosuite needs robosuite installed (pip install --no-deps robosuite) "
                "or VLA_ROBOSUITE_ASSETS=<robosuite>/models/assets"
            )
        root = str(Path(next(iter(found.submodule_search_locations))) / "models" / "assets")
    path = Path(root) / "robots" / "panda" / "robot.xml"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found (VLA_ROBOSUITE_ASSETS should be robosuite's models/assets)"
        )
    spec = _strip_actuators(mujoco.MjSpec.from_file(str(path)))
    for g in spec.geoms:
        if g.name.endswith("_collision"):
            g.group = 3  # drawn as the detailed visual meshes instead
    return spec, "base"


def _menagerie_arm() -> tuple[mujoco.MjSpec, str]:
    """MuJoCo Menagerie's ``franka_emika_panda/panda_nohand.xml`` from ``$MENAGERIE_ROOT``, with robosuite's
    flange frame (``right_hand``) and wrist camera added, so the gripper and the tasks see the same
    kinematics."""
    root = os.environ.get("MENAGERIE_ROOT")
    if not root:
        raise FileNotFoundError(f"{ARM_MODEL_ENV}=menagerie needs MENAGERIE_ROOT=<mujoco_menagerie checkout>")
    path = Path(root) / "franka_emika_panda" / "panda_nohand.xml"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found (MENAGERIE_ROOT should hold franka_emika_panda/)")
    spec = _strip_actuators(mujoco.MjSpec.from_file(str(path)))
    for key in list(spec.keys):
        spec.delete(key)
    for light in list(spec.lights):
        spec.delete(light)
    hand = spec.body("link7").add_body(name="right_hand", pos=[0, 0, 0.1065], quat=[0.924, 0, 0, -0.383])
    hand.add_camera(name="eye_in_hand", pos=[0.05, 0, 0], quat=[0, 0.707108, 0.707108, 0], fovy=75)
    return spec, "link0"


def _load_arm() -> tuple[mujoco.MjSpec, str]:
    """The arm spec without actuators, and the name of its root body."""
    return {"vendored": _vendored_arm, "robosuite": _robosuite_arm, "menagerie": _menagerie_arm}[
        arm_model()
    ]()


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
    arm, root_body = _load_arm()
    gripper = _load_gripper()
    hand = arm.body("right_hand")
    site = hand.add_site(name="gripper_mount")
    site.attach_body(gripper.body("right_gripper"), "gripper/", "")
    frame = world.worldbody.add_frame(pos=list(pos))
    frame.attach_body(arm.body(root_body), robot.prefix, "")

    p = robot.prefix
    for b in (*robot.arm_bodies, "right_hand"):
        world.body(p + b).gravcomp = 1.0
    for b in ("right_gripper", "leftfinger", "rightfinger", "eef", "finger_joint1_tip", "finger_joint2_tip"):
        world.body(p + "gripper/" + b).gravcomp = 1.0
    # joint and actuator ranges from the profile (robosuite's and Menagerie's XML ranges already equal the
    # FCI limits; setting them here keeps the profile the one source)
    for name, kp, flim, rng in zip(
        robot.arm_joints, robot.kp, robot.force_limit, robot.joint_range, strict=True
    ):
        j = world.joint(p + name)
        j.range = list(rng)
        j.limited = mujoco.mjtLimited.mjLIMITED_TRUE
        j.armature = 0.1
        set_damping(j, 5.0)
        act = world.add_actuator(name=p + "act_" + name, target=p + name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=kp, kv=0.1 * kp)
        act.ctrlrange = list(rng)
        act.ctrllimited = 1
        act.forcerange = [-flim, flim]
        act.forcelimited = 1
    f1, f2 = (p + "gripper/" + n for n in robot.finger_joints)
    eq = world.add_equality(type=mujoco.mjtEq.mjEQ_JOINT, name1=f2, name2=f1)
    eq.data[:5] = [0.0, -1.0, 0.0, 0.0, 0.0]
    g = world.add_actuator(name=p + "act_gripper", target=f1, trntype=mujoco.mjtTrn.mjTRN_JOINT)
    g.set_to_position(kp=300.0, kv=20.0)
    g.ctrlrange = sorted(robot.gripper_range)
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
