"""An arm behind ROS topics as the runtime's :class:`~vla.robot.Robot`, and ROS teleop topics as its
:class:`~vla.robot.Teleoperator`. Translation only: the node's subscriptions feed :meth:`TopicRobot.on_*`,
``observe`` returns the latest messages with their header stamps, ``command``/``hold`` publish.

No policy, safety, upcycling or compensation logic lives here: those run in ``vla.runtime`` around this
robot, exactly as they run around the simulator. Observation ages are the messages' header stamps against
the node's clock, so a stale camera or joint state trips the runtime's watchdog.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
from sensor_msgs.msg import CompressedImage, Image, JointState

from vla.robot import Capabilities, EpisodeStatus, Observation, Robot, RobotProfile
from vla_ros.conversions import decode_image, joint_positions, to_seconds

Publish = Callable[[np.ndarray], None]  # arm targets [J] or the gripper target [1]


class InputsNotReady(RuntimeError):
    """An episode cannot start: a topic has not delivered (fresh) messages; the message names it."""


class TopicRobot:
    """See the module docstring.

    Args:
        profile: The arm's profile (its rate may be overridden by the node's ``control_hz``).
        joint_names: ROS names of the profile's arm joints, in profile order.
        gripper_joint: ROS name of the gripper joint ('' : none).
        cameras: Profile camera name -> topic (for error messages).
        image_size: (H, W) the policy reads; frames of another size are resized.
        clock: The node's clock in seconds (what header stamps are compared with).
        publish_arm / publish_gripper: Send arm / gripper targets to the controllers.
        reset_hook: Called at each episode start (e.g. a sim scene reset over a service); may be None.
    """

    def __init__(
        self,
        profile: RobotProfile,
        *,
        joint_names: Sequence[str],
        gripper_joint: str,
        cameras: dict[str, str],
        image_size: tuple[int, int] | None,
        clock: Callable[[], float],
        publish_arm: Publish,
        publish_gripper: Publish | None,
        reset_hook: Callable[[], None] | None = None,
        inputs_timeout_s: float = 5.0,
    ) -> None:
        self.profile = profile
        self.capabilities = Capabilities(realtime=True, resettable=False, joint_velocities=True)
        self.joint_names, self.gripper_joint = list(joint_names), gripper_joint
        self.cameras, self.image_size = dict(cameras), image_size
        self.clock, self.publish_arm, self.publish_gripper = clock, publish_arm, publish_gripper
        self.reset_hook, self.inputs_timeout_s = reset_hook, inputs_timeout_s
        self.instruction = ""
        self._lock = threading.Lock()
        self._joints: tuple[np.ndarray, float | None, np.ndarray | None, float] | None = None
        self._images: dict[str, tuple[np.ndarray, float]] = {}
        self.input_errors: dict[str, str] = {}  # topic -> the last message it could not translate
        self._status = EpisodeStatus()
        self._stop = threading.Event()
        self._last_gripper: float | None = None
        self._hold: np.ndarray | None = None
        self._periods = 0

    # ---- subscription callbacks (executor threads) -------------------------------------------------------
    def on_joint_state(self, msg: JointState) -> None:
        try:
            q, dq = joint_positions(msg, self.joint_names, velocities=True)
            g = None
            if self.gripper_joint:
                g = float(joint_positions(msg, [self.gripper_joint])[0][0])
        except (KeyError, ValueError) as exc:
            self.input_errors["joint_states"] = str(exc)  # not this arm's joints: ignored, reported
            return
        with self._lock:
            self._joints = (q, g, dq, to_seconds(msg.header.stamp))

    def on_image(self, camera: str, msg: Image | CompressedImage) -> None:
        try:
            image = decode_image(msg, self.image_size)
        except ValueError as exc:
            self.input_errors[self.cameras[camera]] = str(exc)  # a frame that cannot be read ages the camera
            return
        with self._lock:
            self._images[camera] = (image, to_seconds(msg.header.stamp))

    def on_instruction(self, text: str) -> None:
        self.instruction = text

    # ---- episode control (services) ------------------------------------------------------------------------
    @property
    def periods(self) -> int:
        """Control periods (commands or holds) sent since the episode started."""
        return self._periods

    def mark(self, success: bool | None) -> None:
        """End the episode: a success / failure mark (None: stopped without a mark)."""
        self._status = EpisodeStatus(success=success, done=True)
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # ---- Robot -------------------------------------------------------------------------------------------
    def now(self) -> float:
        return self.clock()

    def reset(self, seed: int | None = None) -> None:
        """Start an episode where the arm is; wait for joint states and frames newer than the start."""
        self._status, self._hold, self._periods = EpisodeStatus(), None, 0
        self._stop.clear()
        started = self.now()
        if self.reset_hook is not None:
            self.reset_hook()
            started = self.now()
        deadline = time.monotonic() + self.inputs_timeout_s
        while True:
            missing = self._stale_inputs(since=started if self.reset_hook is not None else None)
            if not missing:
                return
            if time.monotonic() > deadline or self._stop.is_set():
                errors = {t: e for t, e in self.input_errors.items() if t in missing}
                raise InputsNotReady(
                    f"no fresh messages within {self.inputs_timeout_s:.1f} s on {missing}"
                    + (f" ({errors})" if errors else "")
                )
            time.sleep(0.01)

    def _stale_inputs(self, since: float | None) -> list[str]:
        with self._lock:
            joints, images = self._joints, dict(self._images)
        missing = []
        if joints is None or (since is not None and joints[3] < since):
            missing.append("joint_states")
        for cam, topic in self.cameras.items():
            if cam not in images or (since is not None and images[cam][1] < since):
                missing.append(topic)
        return missing

    def observe(self) -> Observation:
        with self._lock:
            assert self._joints is not None, "observe() before reset()"
            q, g, dq, t = self._joints
            images = dict(self._images)
        return Observation(
            joints=q.copy(),
            joint_stamp=t,
            gripper=g,
            images={c: im for c, (im, _) in images.items()},
            image_stamps={c: s for c, (_, s) in images.items()},
            instruction=self.instruction,
            joint_velocities=None if dq is None else dq.copy(),
        )

    def command(self, action: np.ndarray) -> None:
        self._hold, self._periods = None, self._periods + 1
        action = np.asarray(action, dtype=np.float64)
        self.publish_arm(action[: self.profile.arm_dim])
        if self.publish_gripper is not None and self.profile.gripper is not None:
            self._last_gripper = float(self.profile.gripper.clip(float(action[self.profile.arm_dim])))
            self.publish_gripper(np.array([self._last_gripper]))

    def hold(self) -> None:
        """Hold the arm where it was measured when the hold began; keep the gripper's last target (opening
        it would drop a grasped object)."""
        self._periods += 1
        if self._hold is None:
            with self._lock:
                joints = self._joints
            if joints is None:
                return  # nothing measured yet: nothing to hold against (no command was ever sent either)
            self._hold = joints[0].copy()
            if self._last_gripper is None and joints[1] is not None:
                self._last_gripper = joints[1]
        self.publish_arm(self._hold)
        if self.publish_gripper is not None and self._last_gripper is not None:
            self.publish_gripper(np.array([self._last_gripper]))

    def status(self) -> EpisodeStatus:
        return self._status


class TopicTeleop:
    """``~/intervention`` (std_msgs/Bool) and ``~/teleop_command`` (sensor_msgs/JointState, matched by
    name) as a :class:`~vla.robot.Teleoperator`. While engaged, the latest teleop command runs; without a
    command yet, or with one older than ``stale_after_s``, the arm holds the measured position. A gripper
    entry missing from the command keeps the measured opening."""

    def __init__(
        self,
        joint_names: Sequence[str],
        gripper_joint: str,
        clock: Callable[[], float],
        stale_after_s: float = 0.25,
    ) -> None:
        self.joint_names, self.gripper_joint = list(joint_names), gripper_joint
        self.clock, self.stale_after_s = clock, stale_after_s
        self._engaged = False
        self._command: tuple[np.ndarray, float | None, float] | None = None
        self.errors: list[str] = []

    def on_intervention(self, engaged: bool) -> None:
        self._engaged = bool(engaged)

    def on_command(self, msg: JointState) -> None:
        try:
            q, _ = joint_positions(msg, self.joint_names)
        except (KeyError, ValueError) as exc:
            self.errors.append(str(exc))
            return
        g = None
        if self.gripper_joint and self.gripper_joint in msg.name:
            g = float(msg.position[list(msg.name).index(self.gripper_joint)])
        self._command = (q, g, self.clock())  # received now (a leader arm's stamps need not be synced)

    # ---- Teleoperator -------------------------------------------------------------------------------------
    def reset(self, robot: Robot) -> None:
        self._command = None if not self._engaged else self._command

    def engaged(self, obs: Observation) -> bool:
        return self._engaged

    def action(self, obs: Observation) -> np.ndarray:
        c = self._command
        measured = obs.state.astype(np.float64)
        if c is None or self.clock() - c[2] > self.stale_after_s:
            return measured
        q, g, _ = c
        return np.r_[q, [] if obs.gripper is None else [obs.gripper if g is None else g]]
