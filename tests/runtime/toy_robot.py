"""A numpy robot for runtime tests: joints follow their position targets within one period (first-order
lag), no cameras. A real implementation of ``vla.robot.Robot``, cheap enough for unit tests."""

from __future__ import annotations

import time

import numpy as np

from vla.robot import Capabilities, EpisodeStatus, GripperModel, JointLimits, Observation, RobotProfile

PROFILE = RobotProfile(
    name="toy2",
    joints=("a", "b"),
    limits=JointLimits(
        lower=(-2.0, -2.0), upper=(2.0, 2.0), max_velocity=(3.0, 3.0), max_acceleration=(30.0, 30.0)
    ),
    gripper=GripperModel(closed=0.0, open=1.0, max_speed=2.0, units="fraction"),
    control_hz=50.0,
    home=(0.0, 0.0),
)


class ToyRobot:
    def __init__(
        self, *, realtime: bool = False, lag: float = 0.5, max_steps: int = 20, goal=(1.0, -1.0)
    ) -> None:
        self.profile = PROFILE
        self.capabilities = Capabilities(realtime=realtime, resettable=True, reports_success=True)
        self.lag, self.max_steps, self.goal = lag, max_steps, np.asarray(goal)
        self.t0 = time.monotonic()
        self.commands: list[np.ndarray] = []
        self.holds = 0
        self.reset()

    def now(self) -> float:
        return time.monotonic() - self.t0 if self.capabilities.realtime else self.steps * self.profile.dt

    def reset(self, seed=None) -> None:
        self.q, self.g, self.steps = np.zeros(2), 1.0, 0
        self.success = False

    def observe(self) -> Observation:
        return Observation(joints=self.q.copy(), joint_stamp=self.now(), gripper=self.g, instruction="go")

    def command(self, action) -> None:
        a = np.asarray(action, dtype=float)
        self.commands.append(a.copy())
        self.q = self.q + self.lag * (a[:2] - self.q)
        self.g = float(a[2])
        self._tick()

    def hold(self) -> None:
        self.holds += 1
        self._tick()

    def _tick(self) -> None:
        self.steps += 1
        self.success = self.success or bool(np.linalg.norm(self.q - self.goal) < 0.05)

    def status(self) -> EpisodeStatus:
        return EpisodeStatus(success=self.success, done=self.success or self.steps >= self.max_steps)
