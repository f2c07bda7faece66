"""Reach: touch a red ball floating above the table with the gripper."""

from __future__ import annotations

import mujoco
import numpy as np

from sim.robots.panda import grip_site_name
from sim.scene import add_marker
from sim.tasks.base import OPEN, TASKS, Phase, Task, set_mocap_pose


@TASKS.register("reach")
class Reach(Task):
    name = "reach"
    instructions = (
        "reach the red ball",
        "touch the red sphere with the gripper",
        "move your hand to the red ball",
        "go to the red target",
    )
    max_steps = 80
    radius = 0.02
    success_dist = 0.03

    stand_radius = 0.006

    def build(self, spec):
        body = add_marker(spec, "target", self.radius, (0.9, 0.1, 0.1, 1.0), sphere=True)
        # a thin visual stand from the table to the ball: its foot on the table plane makes the ball's
        # position recoverable from one camera (a floating ball is ambiguous along the viewing ray)
        body.add_geom(
            name="target_stand",
            type=mujoco.mjtGeom.mjGEOM_CYLINDER,
            size=[self.stand_radius, 0.05, 0],
            pos=[0.0, 0.0, -0.07],  # off the body frame, so MuJoCo does not fuse the frames (set per reset)
            rgba=[0.15, 0.15, 0.15, 1.0],
            contype=0,
            conaffinity=0,
        )

    def reset(self, model, data, rng):
        pos = rng.uniform([0.35, -0.25, 0.05], [0.65, 0.25, 0.3])
        set_mocap_pose(model, data, "target", pos)
        stand = model.geom("target_stand").id
        top = pos[2] - self.radius  # from the table (z = 0) up to the ball's underside
        model.geom_size[stand, 1] = top / 2
        model.geom_pos[stand] = [0.0, 0.0, -self.radius - top / 2]

    def _target(self, model, data):
        return data.mocap_pos[model.body_mocapid[model.body("target").id]].copy()

    def success(self, model, data):
        return bool(
            np.linalg.norm(data.site(grip_site_name()).xpos - self._target(model, data)) < self.success_dist
        )

    def plan(self, model, data):
        return [
            Phase("reach", lambda m, d: (self._target(m, d), 0.0), OPEN, detour_ok=True, settle=2, tol=0.005)
        ]
