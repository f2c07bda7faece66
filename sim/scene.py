"""The shared tabletop scene: table, light, agent-view camera, and the Panda. Tasks add their objects."""

from __future__ import annotations

import mujoco
import numpy as np

from sim.robots.panda import PANDA, RobotInfo, attach_panda

TABLE_TOP_Z = 0.0
AGENTVIEW = "agentview"


def look_at_quat(pos, target, up=(0.0, 0.0, 1.0)) -> list[float]:
    """Quaternion (w, x, y, z) of a MuJoCo camera at ``pos`` looking at ``target`` (camera looks along -z)."""
    pos, target, up = (np.asarray(v, dtype=float) for v in (pos, target, up))
    back = pos - target
    back /= np.linalg.norm(back)
    right = np.cross(up, back)
    right /= np.linalg.norm(right)
    cam_up = np.cross(back, right)
    mat = np.stack([right, cam_up, back], axis=1)
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, mat.flatten())
    return quat.tolist()


def base_scene(robot: RobotInfo = PANDA, with_robot: bool = True) -> mujoco.MjSpec:
    """A world with a table (top at z = 0, in front of the robot base at the origin), light and camera."""
    spec = mujoco.MjSpec()
    spec.compiler.degree = False
    spec.option.timestep = 0.002
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.noslip_iterations = 0
    spec.visual.global_.offwidth = 640
    spec.visual.global_.offheight = 480
    spec.visual.headlight.ambient = [0.45, 0.45, 0.45]
    spec.visual.headlight.diffuse = [0.4, 0.4, 0.4]
    wb = spec.worldbody
    wb.add_light(
        name="sun", pos=[0.5, 0.0, 2.0], dir=[0.0, 0.0, -1.0], castshadow=False, diffuse=[0.5, 0.5, 0.5]
    )
    wb.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[2, 2, 0.1],
        pos=[0, 0, -0.75],
        rgba=[0.35, 0.37, 0.4, 1],
        contype=0,
        conaffinity=0,
    )
    wb.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[0.45, 0.6, 0.025],
        pos=[0.5, 0.0, TABLE_TOP_Z - 0.025],
        rgba=[0.72, 0.6, 0.45, 1],
        friction=[1.0, 0.005, 0.0001],
    )
    # front-right and high: sees the whole workspace in perspective (depth from the table plane), and the
    # arm at home hides less of it than a straight front view (4/40 reach targets hidden, not 8/40)
    cam_pos = [0.95, -0.7, 0.85]
    wb.add_camera(name=AGENTVIEW, pos=cam_pos, quat=look_at_quat(cam_pos, [0.47, 0.0, 0.1]), fovy=52)
    if with_robot:
        attach_panda(spec, robot=robot)
    return spec


def add_box(spec: mujoco.MjSpec, name: str, half: float, rgba, mass: float = 0.05, free: bool = True):
    """A cube; free (a manipulated object) or a static body (use ``mocap`` to move it per episode)."""
    body = spec.worldbody.add_body(name=name, pos=[0.5, 0.0, half])
    if free:
        body.add_freejoint(name=name + "_joint")
    body.add_geom(
        name=name + "_geom",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[half] * 3,
        rgba=list(rgba),
        mass=mass,
        friction=[1.5, 0.01, 0.001],
        condim=4,
        solref=[0.01, 1.0],
    )
    return body


def add_bin(
    spec: mujoco.MjSpec, name: str, inner: tuple[float, float], height: float, rgba, wall: float = 0.008
):
    """An open box (floor + 4 walls) on a mocap body, so its pose can be randomised per episode."""
    body = spec.worldbody.add_body(name=name, pos=[0.5, 0.0, 0.0], mocap=True)
    hx, hy = inner[0] / 2, inner[1] / 2
    body.add_geom(
        name=name + "_floor",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[hx + wall, hy + wall, wall / 2],
        pos=[0, 0, wall / 2],
        rgba=list(rgba),
    )
    h = height / 2
    for i, (px, py, sx, sy) in enumerate(
        [
            (hx + wall / 2, 0, wall / 2, hy + wall),
            (-hx - wall / 2, 0, wall / 2, hy + wall),
            (0, hy + wall / 2, hx, wall / 2),
            (0, -hy - wall / 2, hx, wall / 2),
        ]
    ):
        body.add_geom(
            name=f"{name}_wall{i}",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[sx, sy, h],
            pos=[px, py, h],
            rgba=list(rgba),
        )
    return body


def add_marker(
    spec: mujoco.MjSpec, name: str, radius: float, rgba, height: float = 0.001, sphere: bool = False
):
    """A visual-only target (no collision) on a mocap body."""
    body = spec.worldbody.add_body(name=name, pos=[0.5, 0.0, 0.0], mocap=True)
    if sphere:
        body.add_geom(
            name=name + "_geom",
            type=mujoco.mjtGeom.mjGEOM_SPHERE,
            size=[radius, 0, 0],
            rgba=list(rgba),
            contype=0,
            conaffinity=0,
        )
    else:
        body.add_geom(
            name=name + "_geom",
            type=mujoco.mjtGeom.mjGEOM_CYLINDER,
            size=[radius, height, 0],
            rgba=list(rgba),
            contype=0,
            conaffinity=0,
        )
    return body
