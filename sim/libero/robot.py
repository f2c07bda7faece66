"""A LIBERO task as a :class:`~vla.robot.Robot`: the shared runtime drives it as it drives our MuJoCo arm.

**Observations in the layout of LeRobot's LIBERO datasets** (HuggingFaceVLA/libero, the data SmolVLA,
pi0 and pi0.5 are fine-tuned on, and what LeRobot's ``LiberoProcessorStep`` feeds them):

- two cameras, ``image`` (agent view) and ``image2`` (the wrist camera; :data:`CAMERAS` maps LIBERO's
  camera names to them, ``camera_names=`` to others, e.g. ``wrist_image`` for the openvla-derived
  datasets), uint8 [H, W, 3], 256 x 256 in the datasets. LIBERO renders upside down (OpenGL's bottom-left
  origin); the frames are turned 180 degrees, height and width both flipped, as the datasets store them;
- the 8-d state: end-effector position (3, m), its orientation as an axis-angle vector (3, rad; from
  robosuite's xyzw quaternion), both finger joint positions (2, m): ``Observation.proprio``;
- the task's language instruction.

**Actions** are LIBERO's: 7-d, [-1, 1], a relative end-effector motion (3 position, 3 axis-angle
rotation, scaled by robosuite's OSC_POSE controller) and the gripper (-1 open, +1 closed). The profile
(:data:`LIBERO_PANDA`) describes that command space to the runtime: six "joints" ``dx .. dyaw`` with
range [-1, 1] (the safety layer's position check is the env's action bound) and rate limits that any jump
within the range satisfies in one period (consecutive relative commands are independent; nothing to shape).
Measured "joints" in that space are 0 (holding still is a zero motion), so the safety layer's hold target
and :meth:`LiberoRobot.hold` agree: no motion, the gripper at its last command.

One robot plays a list of tasks: ``reset(seed)`` starts episode ``seed`` of a plan, so parallel workers
and any episode order give the same episodes. Two plans, for episode number ``k = offset + seed``:

- ``per_task`` episodes of each task in turn (evaluation): task ``k // per_task``, initial state
  ``first_init + k % per_task``;
- interleaved (``per_task=None``, rollouts): task ``k % n_tasks``, initial state ``first_init + k //
  n_tasks``, so any number of episodes spreads over the tasks and a resumed collection continues the plan.

Initial states wrap around the 50. Each task's environment is built on first use and kept; the
simulator state after each reset is ``init_state`` (what ``vla-replay env=libero`` restores).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sim.libero.suite import CONTROL_HZ, INIT_STATES, NOOP, LiberoTask, make_env
from vla.robot import Capabilities, EpisodeStatus, GripperModel, JointLimits, Observation, RobotProfile

CAMERAS = {"image": "agentview_image", "image2": "robot0_eye_in_hand_image"}  # ours -> LIBERO's
_AXES = ("dx", "dy", "dz", "droll", "dpitch", "dyaw")
_JUMP = 2.0 * CONTROL_HZ  # a jump across the whole [-1, 1] range in one period

LIBERO_PANDA = RobotProfile(
    name="libero_panda",
    joints=_AXES,
    limits=JointLimits(
        lower=(-1.0,) * 6,
        upper=(1.0,) * 6,
        max_velocity=(_JUMP,) * 6,
        max_acceleration=(_JUMP * CONTROL_HZ,) * 6,
    ),
    gripper=GripperModel(closed=1.0, open=-1.0, max_speed=_JUMP, units="command"),
    control_hz=float(CONTROL_HZ),
    description="LIBERO's Panda under robosuite's OSC_POSE controller: relative end-effector commands",
)


def quat_to_axis_angle(quat: np.ndarray) -> np.ndarray:
    """robosuite's xyzw unit quaternion -> axis-angle vector [3] (rad), angle in [0, pi] as robosuite's
    ``quat2axisangle`` gives it (LeRobot's ``LiberoProcessorStep`` uses the same formula)::

        angle = 2 acos(w),  axis = (x, y, z) / sqrt(1 - w^2)   (0 when the angle is 0)
    """
    q = np.asarray(quat, dtype=np.float64)
    w = float(np.clip(q[3], -1.0, 1.0))
    den = math.sqrt(max(0.0, 1.0 - w * w))
    if math.isclose(den, 0.0):
        return np.zeros(3)
    return q[:3] * 2.0 * math.acos(w) / den


def lerobot_frame(raw: dict[str, Any], cameras: dict[str, str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """LeRobot's ``LiberoEnv`` observation -> (images by our camera name, turned 180 degrees; 8-d state)."""
    pixels = raw["pixels"]
    by_libero = {"agentview_image": pixels.get("image"), "robot0_eye_in_hand_image": pixels.get("image2")}
    images = {ours: np.ascontiguousarray(by_libero[theirs][::-1, ::-1]) for ours, theirs in cameras.items()}
    rs = raw["robot_state"]
    state = np.r_[rs["eef"]["pos"], quat_to_axis_angle(rs["eef"]["quat"]), rs["gripper"]["qpos"]]
    return images, state.astype(np.float32)


class LiberoRobot:
    """See the module docstring. ``tasks``: the plan's tasks; ``per_task``: episodes of each (None: the
    interleaved plan); ``camera_names``: our name -> LIBERO's camera (default :data:`CAMERAS`)."""

    profile = LIBERO_PANDA

    def __init__(
        self,
        tasks: list[LiberoTask],
        per_task: int | None,
        image_size: tuple[int, int] = (256, 256),
        *,
        max_steps: int | None = None,
        camera_names: dict[str, str] | None = None,
        first_init: int = 0,
        offset: int = 0,
    ) -> None:
        if not tasks:
            raise ValueError("LiberoRobot needs at least one task")
        if per_task is not None and not 1 <= per_task <= INIT_STATES:
            raise ValueError(f"per_task={per_task}: LIBERO has {INIT_STATES} initial states per task")
        self.tasks, self.per_task, self.image_size = tasks, per_task, tuple(image_size)
        self.max_steps, self.first_init, self.offset = max_steps, first_init, offset
        self.init_state: np.ndarray | None = None
        self.camera_map = dict(camera_names or CAMERAS)
        self.cameras = list(self.camera_map)
        self.capabilities = Capabilities(realtime=False, resettable=True, reports_success=True)
        self._envs: dict[int, Any] = {}
        self._env: Any = None
        self.task: LiberoTask = tasks[0]
        self._obs: tuple[dict[str, np.ndarray], np.ndarray] | None = None
        self._steps, self._limit = 0, 0
        self._gripper = NOOP[-1]
        self._status = EpisodeStatus()

    def episode(self, index: int) -> tuple[LiberoTask, int]:
        """Episode ``index`` of the plan: its task and initial state."""
        n = len(self.tasks)
        if index < 0 or (self.per_task is not None and index >= n * self.per_task):
            raise ValueError(f"episode {index}: the plan has {n} x {self.per_task} episodes")
        k = self.offset + index
        if self.per_task is None:
            return self.tasks[k % n], (self.first_init + k // n) % INIT_STATES
        return self.tasks[(k // self.per_task) % n], (self.first_init + k % self.per_task) % INIT_STATES

    # ---- Robot ----------------------------------------------------------------------------------------
    def now(self) -> float:
        return self._steps / CONTROL_HZ

    def reset(self, seed: int | None = None) -> None:
        task, init = self.episode(seed or 0)
        if task.index not in self._envs:
            self._envs[task.index] = make_env(task, self.image_size)  # type: ignore[arg-type]
        self.task, self._env = task, self._envs[task.index]
        self._env.init_state_id = init  # LeRobot's LiberoEnv: the fixed initial state of the next reset
        raw, _ = self._env.reset(seed=seed)
        self._limit = min(self.max_steps or self._env._max_episode_steps, self._env._max_episode_steps)
        self._steps, self._gripper = 0, NOOP[-1]
        self._obs = lerobot_frame(raw, self.camera_map)
        self._status = EpisodeStatus(success=False)
        self.init_state = self._env._env.sim.get_state().flatten().copy()

    def observe(self) -> Observation:
        assert self._obs is not None, "observe() before reset()"
        images, state = self._obs
        stamp = self.now()
        return Observation(
            joints=np.zeros(len(_AXES)),
            joint_stamp=stamp,
            gripper=self._gripper,
            images=dict(images),
            image_stamps=dict.fromkeys(images, stamp),
            instruction=self.task.language,
            proprio=state,
        )

    def command(self, action: np.ndarray) -> None:
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (7,) or not np.all(np.isfinite(a)):
            raise ValueError(f"LIBERO takes 7 finite values in [-1, 1], got shape {a.shape}: {a}")
        self._gripper = float(a[-1])
        self._advance(np.clip(a, -1.0, 1.0))

    def hold(self) -> None:
        self._advance(np.r_[np.zeros(len(_AXES)), self._gripper])

    def status(self) -> EpisodeStatus:
        return self._status

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()

    # ---- internals ------------------------------------------------------------------------------------
    def _advance(self, action: np.ndarray) -> None:
        raw, reward, terminated, _, info = self._env.step(action)
        self._steps += 1
        self._obs = lerobot_frame(raw, self.camera_map)
        success = bool(self._status.success) or bool(info.get("is_success"))
        done = bool(terminated) or success or self._steps >= self._limit
        self._status = EpisodeStatus(success=success, done=done, reward=float(reward))

    def success_now(self) -> bool:
        """The suite's goal predicate on the current simulator state (``check_success``)."""
        return bool(self._env._env.check_success())
