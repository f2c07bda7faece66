"""The MuJoCo arm as a :class:`~vla.robot.Robot`: the runtime drives it exactly as it drives hardware.

``SimRobot`` wraps a :class:`~sim.env.TabletopEnv` (optionally under a RoboStress scenario). Each
``command`` / ``hold`` advances one control period; observations are stamped with the simulated time at
which they were captured, so the safety layer's watchdog ages them like a real robot's (a test delays a
camera to see it trip). ``hold`` keeps the arm at the position measured when the hold began and the
gripper at its last command (releasing it would drop a grasped object).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from hardware.profiles import PROFILES
from sim.env import TabletopEnv
from vla.robot import Capabilities, EpisodeStatus, Observation, RobotProfile


class SimRobot:
    """See the module docstring. ``profile``: the arm's profile (default: the Panda's, which the MuJoCo
    model is built from); another 7-joint profile (FR3) runs the same model under its own limits."""

    profile: RobotProfile
    capabilities: Capabilities

    def __init__(
        self, env: TabletopEnv, profile: RobotProfile | None = None, *, realtime: bool = False
    ) -> None:
        self.env = env
        # realtime: the loop paces itself to the wall clock and stamps are wall-clock times (a benchmark of
        # the loop as a robot runs it); otherwise each command advances simulated time by one period
        self.capabilities = Capabilities(
            realtime=realtime, resettable=True, reports_success=True, joint_velocities=True
        )
        self._t0 = time.monotonic()
        # the profile's arm, at the rate the simulation runs (env.control_hz)
        self.profile = replace(profile or PROFILES.get("panda"), control_hz=env.cfg.control_hz)
        if self.profile.action_dim != env.action_space.shape[0]:
            raise ValueError(
                f"profile {self.profile.name} takes {self.profile.action_dim}-d actions; the sim arm "
                f"{env.action_space.shape[0]}"
            )
        self.cameras = list(env.cfg.cameras) if env.cfg.render else []
        self._obs: dict = {}
        self._stamp = 0.0
        self._status = EpisodeStatus()
        self._last: np.ndarray | None = None  # the last command sent
        self._hold: np.ndarray | None = None  # the hold command, latched at the first hold()
        self.init_state: np.ndarray | None = None  # physics state after reset (for replay)
        self.seed: int | None = None

    # ---- Robot ----------------------------------------------------------------------------------------
    def now(self) -> float:
        if self.capabilities.realtime:
            return time.monotonic() - self._t0
        return self.env.steps * self.env.dt

    def reset(self, seed: int | None = None) -> None:
        self.seed = seed
        self._obs, _ = self.env.reset(seed=seed)
        self.init_state = self.env.get_state()
        self._stamp = self.now()
        self._status = EpisodeStatus(success=False)
        self._last = self._obs["state"].astype(np.float64)
        self._hold = None

    def observe(self) -> Observation:
        o, n = self._obs, self.profile.arm_dim
        state = np.asarray(o["state"], dtype=np.float64)
        return Observation(
            joints=state[:n].copy(),
            joint_stamp=self._stamp,
            gripper=float(state[n]),
            images={c: o[c] for c in self.cameras},
            image_stamps={c: self._stamp for c in self.cameras},
            instruction=str(o["instruction"]),
            joint_velocities=self.env.joint_velocity()[:n].copy(),
        )

    def command(self, action: np.ndarray) -> None:
        self._hold = None
        self._advance(np.asarray(action, dtype=np.float64))

    def hold(self) -> None:
        if self._hold is None:
            measured = np.asarray(self._obs["state"], dtype=np.float64)
            gripper = self._last[-1] if self._last is not None else measured[-1]
            self._hold = np.r_[measured[: self.profile.arm_dim], gripper]
        self._advance(self._hold)

    def status(self) -> EpisodeStatus:
        return self._status

    # ---- internals ------------------------------------------------------------------------------------
    def _advance(self, action: np.ndarray) -> None:
        self._last = action.copy()
        self._obs, reward, terminated, truncated, info = self.env.step(action.astype(np.float32))
        self._stamp = self.now()
        success = bool(self._status.success) or bool(info["success"])
        self._status = EpisodeStatus(success=success, done=terminated or truncated, reward=float(reward))

    def close(self) -> None:
        self.env.close()
