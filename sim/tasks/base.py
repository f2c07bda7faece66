"""Task interface: what a tabletop task adds to the scene, how it randomises, when it succeeds, and the
waypoint plan its scripted expert follows."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import mujoco
import numpy as np

from vla.registry import Registry

OPEN, CLOSED = 0.04, 0.0  # gripper action: finger joint position (m)
DOWN = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])  # grip frame pointing down, yaw 0

Target = Callable[[mujoco.MjModel, mujoco.MjData], tuple[np.ndarray, float]]


@dataclass
class Phase:
    """One expert segment: move the grip site to ``target`` (evaluated when the phase starts) with the
    gripper commanded to ``gripper``, then wait ``settle`` control steps."""

    name: str
    target: Target
    gripper: float
    speed: float = 0.3  # m/s of the Cartesian reference
    settle: int = 0
    detour_ok: bool = False  # free-space move: the noisy expert may insert a detour before it
    tol: float = 0.01  # m, how close the IK solution must get before the phase counts as reached


def fold_yaw(yaw: float, period: float = np.pi / 2) -> float:
    """Fold an object's yaw into [-period/2, period/2) (a cube looks the same every 90 deg)."""
    return float((yaw + period / 2) % period - period / 2)


def body_yaw(data: mujoco.MjData, body: str) -> float:
    mat = data.body(body).xmat.reshape(3, 3)
    return float(np.arctan2(mat[1, 0], mat[0, 0]))


def yaw_quat(yaw: float) -> np.ndarray:
    return np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])


def set_free_pose(model: mujoco.MjModel, data: mujoco.MjData, joint: str, pos, yaw: float = 0.0) -> None:
    adr = model.jnt_qposadr[model.joint(joint).id]
    data.qpos[adr : adr + 3] = pos
    data.qpos[adr + 3 : adr + 7] = yaw_quat(yaw)
    vadr = model.jnt_dofadr[model.joint(joint).id]
    data.qvel[vadr : vadr + 6] = 0.0


def set_mocap_pose(model: mujoco.MjModel, data: mujoco.MjData, body: str, pos, yaw: float = 0.0) -> None:
    mid = model.body_mocapid[model.body(body).id]
    data.mocap_pos[mid] = pos
    data.mocap_quat[mid] = yaw_quat(yaw)


def sample_xy(rng: np.random.Generator, lo, hi, avoid: list[np.ndarray], min_dist: float) -> np.ndarray:
    """Rejection-sample an (x, y) in the box [lo, hi] at least ``min_dist`` from every point in ``avoid``."""
    for _ in range(1000):
        p = rng.uniform(lo, hi)
        if all(np.linalg.norm(p - a[:2]) >= min_dist for a in avoid):
            return p
    raise RuntimeError("could not place objects apart; widen the sampling region")


class Task(ABC):
    """A tabletop task. Subclasses register with ``@TASKS.register(name)``."""

    name: ClassVar[str]
    instructions: ClassVar[tuple[str, ...]]  # paraphrases; the first is the canonical one
    max_steps: ClassVar[int] = 150  # control steps at the default 10 Hz

    @abstractmethod
    def build(self, spec: mujoco.MjSpec) -> None:
        """Add this task's objects to the scene."""

    @abstractmethod
    def reset(self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
        """Randomise object poses (robot already at home)."""

    @abstractmethod
    def success(self, model: mujoco.MjModel, data: mujoco.MjData) -> bool:
        """Whether the task is solved in the current state."""

    @abstractmethod
    def plan(self, model: mujoco.MjModel, data: mujoco.MjData) -> list[Phase]:
        """The scripted expert's phases."""

    def takeover_phase(self, model: mujoco.MjModel, data: mujoco.MjData, phases: list[Phase]) -> int:
        """The phase a teleoperator taking over mid-episode starts from (default: the first).

        Tasks that carry an object override this: when the object is already held, start at "carry".
        """
        return 0


TASKS: Registry[type[Task]] = Registry("task")
