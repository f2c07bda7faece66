"""``TabletopEnv``: a gymnasium env over one registered task with the Panda, joint-position actions.

Action: 7 arm joint position targets (rad) + 1 gripper finger position target (m, 0 closed .. 0.04 open).
Observation: ``{"<camera>": uint8 [H, W, 3] per camera, "state": float32 [8], "instruction": str}``;
state = 7 arm joint positions + the finger position.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, replace
from typing import ClassVar

import gymnasium as gym
import mujoco
import numpy as np

import sim.tasks  # noqa: F401  (registers the task suite)
from sim.gym_registration import register_all
from sim.rendering import CameraRenderer, speed_up_visuals
from sim.robots.panda import PANDA, arm_qpos_adr, finger_qpos_adr, grip_site_name, wrist_camera_name
from sim.scene import AGENTVIEW, base_scene
from sim.tasks.base import OPEN, TASKS, Task
from vla.errors import InputError

CAMERAS = {"agentview": AGENTVIEW, "wrist": wrist_camera_name()}
DEFAULT_IMAGE_SIZE = (96, 96)


@dataclass
class EnvConfig:
    """Options of :class:`TabletopEnv` (every field also a Hydra override).

    In ``vla-collect``, ``vla-eval`` and ``vla-rollout`` the task is the tool's ``task=`` (one source):
    ``env.task`` stays unset there, and a different one is refused.
    """

    task: str | None = None  # the env's task (required by TabletopEnv); None in the tools' configs
    # H, W; None: 96 x 96 (vla-eval / vla-rollout: the checkpoint's, the size its policy was trained on)
    image_size: tuple[int, int] | None = None
    cameras: tuple[str, ...] = ("agentview", "wrist")
    control_hz: float = 10.0
    render: bool = True
    max_steps: int | None = None  # default: the task's
    terminate_on_success: bool = True
    instruction: int | None = None  # None: a random paraphrase per episode; int: a fixed one

    def __post_init__(self) -> None:
        if self.task is not None and self.task not in TASKS:
            TASKS.get(self.task)  # raises with the list of tasks
        unknown = set(self.cameras) - set(CAMERAS)
        if unknown:
            raise ValueError(f"unknown camera(s) {sorted(unknown)}; available: {sorted(CAMERAS)}")
        if not 1.0 <= self.control_hz <= 100.0:
            raise ValueError(f"control_hz={self.control_hz} out of [1, 100]")
        if self.image_size is not None:
            self.image_size = tuple(int(v) for v in self.image_size)  # type: ignore[assignment]


def with_task(env: EnvConfig, task: str) -> EnvConfig:
    """``env`` on the tool's ``task=``, its one source: an ``env.task`` that names another is refused.

    Raises:
        InputError: ``env.task`` is set and differs from ``task``.
    """
    if env.task is not None and env.task != task:
        raise InputError(f"env.task={env.task} differs from task={task}: set the task once, with task=<name>")
    return EnvConfig(**{**vars(env), "task": task})  # validates the task name


class TabletopEnv(gym.Env):
    """A Panda on a table with one task; gymnasium API, usable in vector envs."""

    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, config: EnvConfig | None = None, **overrides) -> None:
        cfg = config or EnvConfig(**overrides)
        if cfg.task is None:
            raise ValueError("EnvConfig.task is required: name a task (vla-tasks lists them)")
        if cfg.image_size is None:
            cfg = replace(cfg, image_size=DEFAULT_IMAGE_SIZE)
        self.cfg = cfg
        self.task: Task = TASKS.get(cfg.task)()
        spec = base_scene()
        self.task.build(spec)
        self.model = spec.compile()
        speed_up_visuals(self.model)
        self.data = mujoco.MjData(self.model)
        self._arm = arm_qpos_adr(self.model)
        self._finger = finger_qpos_adr(self.model)[0]
        joint_of = {int(a): j for j, a in enumerate(self.model.jnt_qposadr)}  # qpos address -> joint
        self._dofs = [int(self.model.jnt_dofadr[joint_of[int(a)]]) for a in (*self._arm, self._finger)]
        self._grip = self.model.site(grip_site_name()).id
        self.n_substeps = max(1, round(1.0 / (cfg.control_hz * self.model.opt.timestep)))
        self.dt = self.n_substeps * self.model.opt.timestep
        self.max_steps = cfg.max_steps or int(self.task.max_steps * cfg.control_hz / 10.0)
        self.metadata = {**self.metadata, "render_fps": cfg.control_hz}
        # the Panda profile's joint limits and gripper range (= the MuJoCo joint and actuator ranges)
        lo = np.r_[PANDA.joint_range[:, 0], min(PANDA.gripper_range)]
        hi = np.r_[PANDA.joint_range[:, 1], max(PANDA.gripper_range)]
        self.action_space = gym.spaces.Box(lo.astype(np.float32), hi.astype(np.float32), dtype=np.float32)
        h, w = cfg.image_size
        spaces: dict[str, gym.Space] = {
            cam: gym.spaces.Box(0, 255, (h, w, 3), dtype=np.uint8)
            for cam in (cfg.cameras if cfg.render else ())
        }
        spaces["state"] = gym.spaces.Box(-np.inf, np.inf, (8,), dtype=np.float32)
        spaces["instruction"] = gym.spaces.Text(max_length=200, charset=string.printable)
        self.observation_space = gym.spaces.Dict(spaces)
        self._renderer = (
            CameraRenderer(self.model, {CAMERAS[c]: cfg.image_size for c in cfg.cameras})
            if cfg.render
            else None
        )
        self.instruction = self.task.instructions[0]
        self.steps = 0
        # joint-level execution errors between the command and the actuators (sim.robostress): each maps
        # the commanded action [8] to what the actuators receive; reset() at every episode start
        self.command_filters: list = []

    # ---- state -------------------------------------------------------------------------------------
    def joint_state(self) -> np.ndarray:  # [8]
        return np.r_[self.data.qpos[self._arm], self.data.qpos[self._finger]].astype(np.float32)

    def joint_velocity(self) -> np.ndarray:  # [8]
        """Arm joint velocities (rad/s) and the finger velocity (m/s)."""
        return self.data.qvel[self._dofs].astype(np.float64)

    def grip_pos(self) -> np.ndarray:  # [3]
        return self.data.site_xpos[self._grip].copy()

    def get_state(self) -> np.ndarray:
        """The full physics state (qpos, qvel, act, mocap poses, time) for exact restore."""
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        out = np.empty(mujoco.mj_stateSize(self.model, spec))
        mujoco.mj_getState(self.model, self.data, out, spec)
        return out

    def set_state(self, state: np.ndarray) -> None:
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        if len(state) != mujoco.mj_stateSize(self.model, spec):
            raise ValueError(
                f"state has {len(state)} values; this model needs {mujoco.mj_stateSize(self.model, spec)}"
            )
        mujoco.mj_setState(self.model, self.data, np.asarray(state, dtype=np.float64), spec)
        mujoco.mj_forward(self.model, self.data)

    def set_joints(self, q: np.ndarray) -> None:
        """Puts the arm and the fingers at ``q`` [8] (7 joint positions, the finger position, as in
        ``state``), at rest and commanded to stay; the objects keep their places."""
        q = np.asarray(q, dtype=np.float64).reshape(-1)
        if q.shape != (8,) or not np.all(np.isfinite(q)):
            raise ValueError(f"joints must be 8 finite values (7 arm joints + finger), got {q.shape}")
        fingers = finger_qpos_adr(self.model)
        self.data.qpos[self._arm] = q[:7]
        self.data.qpos[fingers] = [q[7], -q[7]][: len(fingers)]
        self.data.qvel[self._dofs] = 0.0
        self.data.ctrl[:8] = q
        mujoco.mj_forward(self.model, self.data)

    def _obs(self) -> dict:
        obs: dict = {"state": self.joint_state(), "instruction": self.instruction}
        if self._renderer is not None:
            imgs = self._renderer.render(self.data)
            for cam in self.cfg.cameras:
                obs[cam] = imgs[CAMERAS[cam]]
        return obs

    # ---- gymnasium ---------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        rng = self.np_random
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[self._arm] = PANDA.home
        self.data.qpos[finger_qpos_adr(self.model)] = [OPEN, -OPEN]
        self.data.ctrl[:7] = PANDA.home
        self.data.ctrl[7] = OPEN
        self.task.reset(self.model, self.data, rng)
        k = self.cfg.instruction
        self.instruction = self.task.instructions[
            k if k is not None else int(rng.integers(len(self.task.instructions)))
        ]
        mujoco.mj_forward(self.model, self.data)
        for _ in range(10):  # let objects settle
            mujoco.mj_step(self.model, self.data)
        if options and "state" in options:  # exact restore of a recorded initial state (replay)
            self.set_state(np.asarray(options["state"]))
        if options and "joints" in options:  # the robot at a recorded state [8], the task's scene as reset
            self.set_joints(np.asarray(options["joints"]))
        self.steps = 0
        for f in self.command_filters:
            f.reset(np.r_[self.data.qpos[self._arm], self.data.ctrl[7]])
        info = {"task": self.cfg.task, "instruction": self.instruction, "success": False}
        return self._obs(), info

    def step(self, action):
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (8,) or not np.all(np.isfinite(a)):
            raise ValueError(f"action must be 8 finite values, got shape {a.shape}: {a}")
        a = np.clip(a, self.action_space.low, self.action_space.high)
        for f in self.command_filters:
            a = f(a)
        self.data.ctrl[:] = a
        for _ in range(self.n_substeps):
            mujoco.mj_step(self.model, self.data)
        self.steps += 1
        success = self.task.success(self.model, self.data)
        terminated = success and self.cfg.terminate_on_success
        truncated = self.steps >= self.max_steps and not terminated
        info = {"success": success, "is_success": success}
        return self._obs(), float(success), terminated, truncated, info

    def render(self):
        if self._renderer is None:
            return None
        return self._renderer.render(self.data)[CAMERAS[self.cfg.cameras[0]]]

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


register_all()
