"""Subscribers of :func:`vla.runtime.loop.run_episode`: what watches an episode without being the loop.

- :class:`FrameRecorder` -- the episode as LeRobotDataset frames (the intervention recorder: executed
  action, the policy's proposal, ``is_intervention``), kept in memory or written by an ``EpisodeWriter``;
- :class:`VideoRecorder` -- camera frames side by side, written as an mp4 at the end;
- :class:`TrajectoryMetrics` -- the measured joint trajectory (jerk) and the period timing (jitter).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vla.data.schema import ACTION, DONE, IS_INTERVENTION, POLICY_ACTION, REWARD, STATE, TASK, image_key
from vla.robot import Observation, Robot
from vla.runtime.loop import EpisodeResult, StepRecord


class FrameRecorder:
    """One dataset frame per period: the observation the decision saw, the action that ran (the
    operator's or the policy's target, before self-compensation; the hold target while the safety layer
    holds), the policy's proposal beside it, whether the operator was in control, reward and done.

    ``writer``: an :class:`~vla.data.writer.EpisodeWriter` to write each frame as it comes and commit the
    episode at the end (``episode_meta()`` gives success, source and extra); None keeps ``frames``.
    """

    def __init__(self, cameras: Sequence[str], writer: Any = None, source: str = "policy") -> None:
        self.cameras, self.writer, self.source = list(cameras), writer, source
        self.frames: list[dict] = []
        self.extra: dict = {}

    def on_start(self, robot: Robot, obs: Observation) -> None:
        self.frames = []

    def on_step(self, step: StepRecord) -> None:
        out = step.out
        action = np.asarray(out.target, dtype=np.float32)
        proposal = action if out.policy_action is None else np.asarray(out.policy_action, dtype=np.float32)
        frame: dict[str, Any] = {image_key(c): step.obs.images[c] for c in self.cameras}
        frame.update(
            {
                STATE: step.obs.state,
                ACTION: action,
                POLICY_ACTION: proposal.copy(),
                IS_INTERVENTION: np.array([out.is_intervention]),
                REWARD: np.array([step.status.reward], dtype=np.float32),
                DONE: np.array([step.done]),
                TASK: step.obs.instruction,
            }
        )
        if self.writer is not None:
            self.writer.add_frame(frame)
        else:
            self.frames.append(frame)

    def on_end(self, result: EpisodeResult) -> None:
        if self.writer is not None:
            self.writer.end_episode(success=bool(result.success), source=self.source, extra=self.extra)


class VideoRecorder:
    """Camera frames (the first observation and one per period), written to ``path`` at the end."""

    def __init__(self, path: str | Path, cameras: Sequence[str], fps: int) -> None:
        self.path, self.cameras, self.fps = Path(path), list(cameras), fps
        self.frames: dict[str, list[np.ndarray]] = {}

    def on_start(self, robot: Robot, obs: Observation) -> None:
        self.frames = {c: [obs.images[c]] for c in self.cameras}

    def on_step(self, step: StepRecord) -> None:
        for c in self.cameras:
            self.frames[c].append(step.next_obs.images[c])

    def on_end(self, result: EpisodeResult) -> None:
        from vla.video import write_video

        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_video(self.path, {c: np.stack(f) for c, f in self.frames.items()}, self.fps)


class TrajectoryMetrics:
    """The measured arm trajectory and the control periods' wall-clock starts."""

    def __init__(self) -> None:
        self.joints: list[np.ndarray] = []
        self.period_starts: list[float] = []
        self.work_s: list[float] = []

    def on_start(self, robot: Robot, obs: Observation) -> None:
        self.joints, self.period_starts, self.work_s = [np.asarray(obs.joints, dtype=np.float64)], [], []

    def on_step(self, step: StepRecord) -> None:
        self.joints.append(np.asarray(step.next_obs.joints, dtype=np.float64))
        self.period_starts.append(step.wall_time)
        self.work_s.append(step.work_s)

    def on_end(self, result: EpisodeResult) -> None:
        pass

    def jerk(self, dt: float) -> float:
        """Mean squared jerk of the executed trajectory (rad^2 / s^6)."""
        return mean_squared_jerk(np.asarray(self.joints), dt)

    def jitter_ms(self, dt: float) -> np.ndarray:
        """|measured period - dt| per period, in ms."""
        return 1000 * np.abs(np.diff(self.period_starts) - dt)


def mean_squared_jerk(q: np.ndarray, dt: float) -> float:
    """mean ||d^3 q / dt^3||^2 over an executed joint trajectory [T, J] (0 when T < 4)."""
    if len(q) < 4:
        return 0.0
    jerk = np.diff(q, n=3, axis=0) / dt**3
    return float(np.mean(np.sum(jerk**2, axis=1)))
