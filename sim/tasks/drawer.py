"""Drawer (two stages): pull the drawer open by its handle, then put the red cube inside it."""

from __future__ import annotations

import mujoco
import numpy as np

from sim.robots.panda import set_damping
from sim.scene import add_box
from sim.tasks.base import CLOSED, OPEN, TASKS, Phase, Task, sample_xy, set_free_pose
from sim.tasks.pick_place import grasp_phases, place_phases, released

CUBE_HALF = 0.02
DRAWER_POS = np.array([0.74, 0.12, 0.005])  # interior centre when closed (floor bottom at z = 0.005)
IN_HALF, WALL_H, T = 0.08, 0.05, 0.008  # interior half size, wall height, wall thickness
HANDLE_OFFSET, HANDLE_Z = 0.06, 0.045  # handle bar: in front of the front wall, height above the table
PULL = 0.16
OPEN_ENOUGH = -0.1  # drawer joint position (m) that counts as open
BOX = mujoco.mjtGeom.mjGEOM_BOX


def _drawer(spec: mujoco.MjSpec) -> None:
    wood, dark = [0.55, 0.4, 0.28, 1.0], [0.25, 0.25, 0.27, 1.0]
    wb = spec.worldbody
    x0, y0 = DRAWER_POS[:2]
    front = x0 - IN_HALF - T
    back = x0 + IN_HALF + T + 0.01
    cx, hx = (front + back) / 2, (back - front) / 2
    side = IN_HALF + T + 0.012
    wb.add_geom(name="cabinet_top", type=BOX, size=[hx, side + 0.01, 0.006], pos=[cx, y0, 0.076], rgba=wood)
    for s in (-1, 1):
        wb.add_geom(
            name=f"cabinet_side{s:+d}",
            type=BOX,
            size=[hx, 0.005, 0.035],
            pos=[cx, y0 + s * side, 0.035],
            rgba=wood,
        )
    wb.add_geom(name="cabinet_back", type=BOX, size=[0.005, side, 0.035], pos=[back, y0, 0.035], rgba=wood)

    body = wb.add_body(name="drawer", pos=DRAWER_POS.tolist())
    joint = body.add_joint(
        name="drawer_joint",
        type=mujoco.mjtJoint.mjJNT_SLIDE,
        axis=[1, 0, 0],
        range=[-0.2, 0.0],
        frictionloss=0.3,
    )
    set_damping(joint, 5.0)
    h = WALL_H / 2
    body.add_geom(
        name="drawer_floor",
        type=BOX,
        size=[IN_HALF + T, IN_HALF + T, 0.003],
        pos=[0, 0, 0.003],
        rgba=wood,
        mass=0.3,
    )
    for i, (px, py, sx, sy) in enumerate(
        [
            (-(IN_HALF + T / 2), 0, T / 2, IN_HALF + T),
            (IN_HALF + T / 2, 0, T / 2, IN_HALF + T),
            (0, IN_HALF + T / 2, IN_HALF, T / 2),
            (0, -(IN_HALF + T / 2), IN_HALF, T / 2),
        ]
    ):
        body.add_geom(
            name=f"drawer_wall{i}", type=BOX, size=[sx, sy, h], pos=[px, py, h + 0.006], rgba=wood, mass=0.05
        )
    hx_rel = -(IN_HALF + T) - HANDLE_OFFSET
    hz = HANDLE_Z - DRAWER_POS[2]
    body.add_geom(
        name="drawer_handle",
        type=mujoco.mjtGeom.mjGEOM_CAPSULE,
        size=[0.008, 0.05, 0],
        pos=[hx_rel, 0, hz],
        quat=[0.7071068, 0.7071068, 0, 0],
        rgba=dark,
        mass=0.02,
        friction=[1.5, 0.01, 0.001],
    )
    for s in (-1, 1):
        body.add_geom(
            name=f"drawer_post{s:+d}",
            type=BOX,
            size=[HANDLE_OFFSET / 2, 0.005, 0.006],
            pos=[hx_rel + HANDLE_OFFSET / 2, s * 0.045, hz],
            rgba=dark,
            mass=0.01,
        )


@TASKS.register("drawer")
class DrawerPlace(Task):
    name = "drawer"
    instructions = (
        "open the drawer and put the red cube inside",
        "pull the drawer open, then place the red block in it",
        "open the drawer and store the red cube in the drawer",
        "slide the drawer out and drop the red cube into it",
    )
    max_steps = 260

    def build(self, spec):
        _drawer(spec)
        add_box(spec, "cube", CUBE_HALF, (0.85, 0.15, 0.15, 1.0))

    def reset(self, model, data, rng):
        cube = sample_xy(rng, [0.38, -0.25], [0.56, -0.06], [], 0.0)
        set_free_pose(model, data, "cube_joint", [*cube, CUBE_HALF], yaw=rng.uniform(-np.pi, np.pi))

    def _opening(self, model, data) -> float:
        return float(data.qpos[model.jnt_qposadr[model.joint("drawer_joint").id]])

    def success(self, model, data):
        rel = data.body("cube").xpos - data.body("drawer").xpos
        inside = abs(rel[0]) < IN_HALF and abs(rel[1]) < IN_HALF and rel[2] < WALL_H
        return bool(self._opening(model, data) < OPEN_ENOUGH and inside and released(model, data))

    def plan(self, model, data):
        yaw = -np.pi / 2  # fingers close along x, around the bar

        def handle(m, d):
            return d.geom("drawer_handle").xpos.copy(), yaw

        def pulled(m, d):
            return d.geom("drawer_handle").xpos - np.array([PULL, 0, 0]), yaw

        def up(m, d):
            return d.geom("drawer_handle").xpos + np.array([0, 0, 0.12]), yaw

        def into_drawer(m, d):
            p = d.body("drawer").xpos.copy()
            p[0] -= 0.02
            p[2] = 0.075
            return p, 0.0

        open_phases = [
            Phase(
                "above_handle",
                lambda m, d: (handle(m, d)[0] + np.array([0, 0, 0.1]), yaw),
                OPEN,
                detour_ok=True,
            ),
            Phase("to_handle", handle, OPEN, speed=0.2, settle=1, tol=0.006),
            Phase("grip_handle", handle, CLOSED, settle=5),
            Phase("pull", pulled, CLOSED, speed=0.12, settle=1),
            Phase("let_go", lambda m, d: (d.geom("drawer_handle").xpos.copy(), yaw), OPEN, settle=3),
            Phase("clear", up, OPEN, speed=0.25),
        ]
        return (
            open_phases + grasp_phases("cube", CUBE_HALF, lift=0.16) + place_phases(into_drawer, retreat=0.08)
        )
