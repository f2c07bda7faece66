"""Pick-and-place: put the red cube into the blue bin."""

from __future__ import annotations

import numpy as np

from sim.robots.panda import finger_qpos_adr
from sim.scene import add_bin, add_box
from sim.tasks.base import (
    CLOSED,
    OPEN,
    TASKS,
    Phase,
    Task,
    body_yaw,
    fold_yaw,
    sample_xy,
    set_free_pose,
    set_mocap_pose,
)

CUBE_HALF = 0.02
BIN_INNER = (0.14, 0.14)
BIN_HEIGHT = 0.05


def released(model, data) -> bool:
    """The gripper is open (fingers beyond a cube's half width), so nothing is held."""
    return bool(data.qpos[finger_qpos_adr(model)[0]] > 0.025)


def held(model, data, obj: str, half: float) -> bool:
    """``obj`` is in the closed gripper and off the table."""
    return not released(model, data) and bool(data.body(obj).xpos[2] > half + 0.02)


def carry_phase_if_held(model, data, phases: list[Phase], obj: str, half: float) -> int:
    """The "carry" phase when ``obj`` is held, else the first phase (used by ``Task.takeover_phase``)."""
    names = [p.name for p in phases]
    return names.index("carry") if "carry" in names and held(model, data, obj, half) else 0


def grasp_phases(obj: str, half: float, lift: float = 0.15) -> list[Phase]:
    """Above the object -> descend -> close -> lift (shared by every pick task)."""

    def above(m, d):
        return d.body(obj).xpos + np.array([0, 0, 0.12]), fold_yaw(body_yaw(d, obj))

    def at(m, d):
        p = d.body(obj).xpos.copy()
        return p, fold_yaw(body_yaw(d, obj))

    def up(m, d):
        p = d.body(obj).xpos.copy()
        p[2] = lift
        return p, fold_yaw(body_yaw(d, obj))

    return [
        Phase("above", above, OPEN, detour_ok=True),
        Phase("descend", at, OPEN, speed=0.2, settle=1, tol=0.006),
        Phase("close", at, CLOSED, settle=6),
        Phase("lift", up, CLOSED, speed=0.25),
    ]


def place_phases(target, release_settle: int = 4, retreat: float = 0.1) -> list[Phase]:
    """Carry to above ``target(m, d) -> (pos, yaw)``, lower, open, retreat up."""

    def above(m, d):
        p, yaw = target(m, d)
        return np.asarray(p) + np.array([0, 0, 0.1]), yaw

    def retreat_to(m, d):
        p, yaw = target(m, d)
        return np.asarray(p) + np.array([0, 0, retreat]), yaw

    return [
        Phase("carry", above, CLOSED, detour_ok=True),
        Phase("lower", target, CLOSED, speed=0.2, settle=1),
        Phase("release", target, OPEN, settle=release_settle),
        Phase("retreat", retreat_to, OPEN, speed=0.25),
    ]


@TASKS.register("pick_place")
class PickPlace(Task):
    name = "pick_place"
    instructions = (
        "put the red cube in the blue bin",
        "pick up the red block and drop it into the bin",
        "place the red cube inside the blue container",
        "move the red cube into the bin",
    )
    max_steps = 160

    def build(self, spec):
        add_box(spec, "cube", CUBE_HALF, (0.85, 0.15, 0.15, 1.0))
        add_bin(spec, "bin", BIN_INNER, BIN_HEIGHT, (0.2, 0.35, 0.8, 1.0))

    def reset(self, model, data, rng):
        bin_xy = rng.uniform([0.42, 0.13], [0.6, 0.25])
        set_mocap_pose(model, data, "bin", [*bin_xy, 0.0], yaw=0.0)
        cube_xy = sample_xy(rng, [0.4, -0.25], [0.62, 0.0], [bin_xy], 0.14)
        set_free_pose(model, data, "cube_joint", [*cube_xy, CUBE_HALF], yaw=rng.uniform(-np.pi, np.pi))

    def _bin(self, model, data):
        return data.mocap_pos[model.body_mocapid[model.body("bin").id]]

    def success(self, model, data):
        rel = data.body("cube").xpos - self._bin(model, data)
        inside = abs(rel[0]) < BIN_INNER[0] / 2 and abs(rel[1]) < BIN_INNER[1] / 2 and rel[2] < BIN_HEIGHT
        return bool(inside and released(model, data))

    def plan(self, model, data):
        def drop(m, d):
            return self._bin(m, d) + np.array([0, 0, 0.07]), 0.0

        return grasp_phases("cube", CUBE_HALF) + place_phases(drop)

    def takeover_phase(self, model, data, phases):
        return carry_phase_if_held(model, data, phases, "cube", CUBE_HALF)
