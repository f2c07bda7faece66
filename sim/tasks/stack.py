"""Stack: put the red cube on top of the green cube."""

from __future__ import annotations

import numpy as np

from sim.scene import add_box
from sim.tasks.base import TASKS, Task, body_yaw, fold_yaw, sample_xy, set_free_pose
from sim.tasks.pick_place import carry_phase_if_held, grasp_phases, place_phases, released

TOP_HALF, BASE_HALF = 0.02, 0.025


@TASKS.register("stack")
class Stack(Task):
    name = "stack"
    instructions = (
        "stack the red cube on the green cube",
        "put the red block on top of the green block",
        "place the red cube onto the green one",
        "build a tower with the red cube on the green cube",
    )
    max_steps = 160

    def build(self, spec):
        add_box(spec, "cube_top", TOP_HALF, (0.85, 0.15, 0.15, 1.0))
        add_box(spec, "cube_base", BASE_HALF, (0.2, 0.7, 0.25, 1.0), mass=0.2)

    def reset(self, model, data, rng):
        base = sample_xy(rng, [0.4, -0.22], [0.62, 0.22], [], 0.0)
        top = sample_xy(rng, [0.4, -0.22], [0.62, 0.22], [base], 0.1)
        set_free_pose(model, data, "cube_base_joint", [*base, BASE_HALF], yaw=rng.uniform(-np.pi, np.pi))
        set_free_pose(model, data, "cube_top_joint", [*top, TOP_HALF], yaw=rng.uniform(-np.pi, np.pi))

    def success(self, model, data):
        rel = data.body("cube_top").xpos - data.body("cube_base").xpos
        on_top = np.linalg.norm(rel[:2]) < 0.02 and abs(rel[2] - (TOP_HALF + BASE_HALF)) < 0.008
        return bool(on_top and released(model, data))

    def plan(self, model, data):
        def on_base(m, d):
            p = d.body("cube_base").xpos.copy()
            p[2] += BASE_HALF + TOP_HALF + 0.004
            return p, fold_yaw(body_yaw(d, "cube_base"))

        return grasp_phases("cube_top", TOP_HALF) + place_phases(on_base, release_settle=3, retreat=0.08)

    def takeover_phase(self, model, data, phases):
        return carry_phase_if_held(model, data, phases, "cube_top", TOP_HALF)
