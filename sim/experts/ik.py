"""Differential IK for the arm with mink, on a robot-only model (so it never moves free objects)."""

from __future__ import annotations

import mink
import numpy as np

from sim.robots.panda import PANDA, arm_qpos_adr, grip_site_name
from sim.scene import base_scene
from sim.tasks.base import DOWN


def down_rotation(yaw: float) -> np.ndarray:
    """Grip frame pointing at the table, rotated by ``yaw`` about the world z axis."""
    c, s = np.cos(yaw), np.sin(yaw)
    rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return rz @ DOWN


class ArmIK:
    """Solve joint targets that put the grip site at a pose, starting from a given joint vector."""

    def __init__(self, iterations: int = 4, dt: float = 0.1, posture_cost: float = 1e-2) -> None:
        self.model = base_scene(with_robot=True).compile()
        self._arm = arm_qpos_adr(self.model)
        self.config = mink.Configuration(self.model)
        self.task = mink.FrameTask(
            grip_site_name(), "site", position_cost=1.0, orientation_cost=0.5, lm_damping=1e-3
        )
        self.posture = mink.PostureTask(self.model, cost=posture_cost)
        q0 = self.model.qpos0.copy()
        q0[self._arm] = PANDA.home
        self.posture.set_target(q0)
        self.limits = [mink.ConfigurationLimit(self.model)]
        self.iterations = iterations
        self.dt = dt

    def solve(self, q_arm: np.ndarray, pos: np.ndarray, yaw: float) -> np.ndarray:
        """Joint targets [7] reaching (pos, down-facing yaw), warm-started at ``q_arm``."""
        q = self.model.qpos0.copy()
        q[self._arm] = q_arm
        self.config.update(q)
        target = mink.SE3.from_rotation_and_translation(
            mink.SO3.from_matrix(down_rotation(yaw)), np.asarray(pos)
        )
        self.task.set_target(target)
        for _ in range(self.iterations):
            vel = mink.solve_ik(
                self.config, [self.task, self.posture], self.dt, "daqp", damping=1e-3, limits=self.limits
            )
            self.config.integrate_inplace(vel, self.dt)
        return self.config.q[self._arm].copy()

    def site_pos(self, q_arm: np.ndarray) -> np.ndarray:
        q = self.model.qpos0.copy()
        q[self._arm] = q_arm
        self.config.update(q)
        return self.config.get_transform_frame_to_world(grip_site_name(), "site").translation()

    def site_yaw(self, q_arm: np.ndarray) -> float:
        """Yaw about world z of the grip frame (the inverse of :func:`down_rotation`'s yaw)."""
        q = self.model.qpos0.copy()
        q[self._arm] = q_arm
        self.config.update(q)
        rot = self.config.get_transform_frame_to_world(grip_site_name(), "site").rotation().as_matrix()
        rz = rot @ DOWN.T  # = Rz(yaw) when the grip points down
        return float(np.arctan2(rz[1, 0], rz[0, 0]))
