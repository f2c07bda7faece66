"""Push: slide the red cube onto the green target disc with the closed gripper."""

from __future__ import annotations

import numpy as np

from sim.scene import add_box, add_marker
from sim.tasks.base import CLOSED, TASKS, Phase, Task, set_free_pose, set_mocap_pose

HALF = 0.025
TARGET_R = 0.05
FINGER = 0.012  # half thickness of the closed fingers along the push direction


@TASKS.register("push")
class Push(Task):
    name = "push"
    instructions = (
        "push the red cube onto the green target",
        "slide the red block to the green circle",
        "shove the red cube to the green spot",
        "push the red block onto the green mark",
    )
    max_steps = 120

    def build(self, spec):
        add_box(spec, "cube", HALF, (0.85, 0.15, 0.15, 1.0), mass=0.1)
        add_marker(spec, "target", TARGET_R, (0.2, 0.75, 0.3, 1.0))

    def reset(self, model, data, rng):
        for _ in range(1000):
            cube = rng.uniform([0.4, -0.18], [0.58, 0.18])
            phi = rng.uniform(-np.pi, np.pi)
            dist = rng.uniform(0.12, 0.2)
            target = cube + dist * np.array([np.cos(phi), np.sin(phi)])
            behind = cube - (HALF + 0.06) * np.array([np.cos(phi), np.sin(phi)])
            if 0.36 <= target[0] <= 0.66 and abs(target[1]) <= 0.25 and behind[0] >= 0.3:
                break
        set_free_pose(model, data, "cube_joint", [*cube, HALF], yaw=phi)
        set_mocap_pose(model, data, "target", [*target, 0.001])

    def _target(self, model, data):
        return data.mocap_pos[model.body_mocapid[model.body("target").id]].copy()

    def success(self, model, data):
        return bool(np.linalg.norm(data.body("cube").xpos[:2] - self._target(model, data)[:2]) < 0.035)

    def plan(self, model, data):
        cube = data.body("cube").xpos.copy()
        target = self._target(model, data)
        u = target[:2] - cube[:2]
        u /= np.linalg.norm(u)
        yaw = float((np.arctan2(u[1], u[0]) + np.pi / 2) % np.pi - np.pi / 2)
        z = HALF
        start = np.r_[cube[:2] - (HALF + FINGER + 0.03) * u, z]
        end = np.r_[target[:2] - (HALF + FINGER - 0.005) * u, z]
        back = np.r_[end[:2] - 0.05 * u, z + 0.1]
        return [
            Phase("above", lambda m, d: (start + np.array([0, 0, 0.1]), yaw), CLOSED, detour_ok=True),
            Phase("descend", lambda m, d: (start, yaw), CLOSED, speed=0.2, tol=0.006),
            Phase("push", lambda m, d: (end, yaw), CLOSED, speed=0.12, tol=0.02),
            Phase("retreat", lambda m, d: (back, yaw), CLOSED, speed=0.2),
        ]
