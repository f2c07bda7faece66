"""ROS messages <-> numpy, without cv_bridge: stamps, joint states matched by name, images, commands.

Every function here is pure (no node, no I/O), so the deploy node, the sim robot node and the rosbag2
converter (``hardware/rosbag.py``, which decodes the same message types through ``rosbags``) agree on one
translation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from builtin_interfaces.msg import Duration, Time
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from hardware.ros_images import decode_compressed, decode_raw

__all__ = [
    "array_to_image",
    "decode_image",
    "duration",
    "joint_positions",
    "position_command",
    "read_position_command",
    "stamp",
    "to_seconds",
    "trajectory_command",
]


def to_seconds(t: Time) -> float:
    """A ``builtin_interfaces/Time`` in seconds."""
    return t.sec + t.nanosec * 1e-9


def _split(seconds: float) -> tuple[int, int]:
    sec = int(np.floor(seconds))
    return sec, min(round((seconds - sec) * 1e9), 999_999_999)


def stamp(seconds: float) -> Time:
    sec, nanosec = _split(seconds)
    return Time(sec=sec, nanosec=nanosec)


def duration(seconds: float) -> Duration:
    sec, nanosec = _split(seconds)
    return Duration(sec=sec, nanosec=nanosec)


def joint_positions(
    msg: JointState, names: Sequence[str], *, velocities: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """Positions (and velocities, when asked and present) of ``names`` in that order, matched by name.

    Raises:
        KeyError: A joint of ``names`` is not in the message (names the joint and what the message has).
    """
    index = {n: i for i, n in enumerate(msg.name)}
    missing = [n for n in names if n not in index]
    if missing:
        raise KeyError(f"joint_states has no joint(s) {missing}; it names {list(msg.name)}")
    if len(msg.position) != len(msg.name):
        raise ValueError(f"joint_states: {len(msg.name)} names but {len(msg.position)} positions")
    idx = [index[n] for n in names]
    q = np.asarray(msg.position, dtype=np.float64)[idx]
    dq = None
    if velocities and len(msg.velocity) == len(msg.name):
        dq = np.asarray(msg.velocity, dtype=np.float64)[idx]
    return q, dq


def decode_image(msg: Image | CompressedImage, size: tuple[int, int] | None = None) -> np.ndarray:
    """uint8 [H, W, 3] RGB from ``sensor_msgs/Image`` (rgb8, bgr8, rgba8, bgra8, mono8) or
    ``CompressedImage`` (jpeg, png), resized to ``size`` = (H, W) when given and different."""
    if isinstance(msg, CompressedImage):
        return decode_compressed(bytes(msg.data), size)
    return decode_raw(bytes(msg.data), msg.height, msg.width, msg.step, msg.encoding, size)


def array_to_image(image: np.ndarray, t: float, frame_id: str = "") -> Image:
    """An rgb8 ``sensor_msgs/Image`` of ``image`` uint8 [H, W, 3], stamped ``t`` (s)."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    h, w = image.shape[:2]
    msg = Image(height=h, width=w, encoding="rgb8", is_bigendian=0, step=w * 3)
    msg.header.stamp = stamp(t)
    msg.header.frame_id = frame_id
    msg.data = image.tobytes()
    return msg


def trajectory_command(names: Sequence[str], positions: np.ndarray, reach_in: float) -> JointTrajectory:
    """A one-point ``JointTrajectory`` for a JointTrajectoryController: reach ``positions`` ``reach_in``
    seconds from now (a zero header stamp means "start now")."""
    point = JointTrajectoryPoint(positions=[float(p) for p in positions], time_from_start=duration(reach_in))
    return JointTrajectory(joint_names=list(names), points=[point])


def position_command(positions: np.ndarray) -> Float64MultiArray:
    """A forward position controller's command (``/<controller>/commands``), in its joint order."""
    return Float64MultiArray(data=[float(p) for p in positions])


def read_position_command(msg: JointTrajectory | Float64MultiArray, names: Sequence[str]) -> np.ndarray:
    """The positions a command message sets for ``names`` (a trajectory's last point, matched by name;
    a forward command in order).

    Raises:
        ValueError: An empty trajectory, a joint missing from it, or a forward command of the wrong size.
    """
    if isinstance(msg, Float64MultiArray):
        if len(msg.data) != len(names):
            raise ValueError(f"command has {len(msg.data)} values for {len(names)} joints {list(names)}")
        return np.asarray(msg.data, dtype=np.float64)
    if not msg.points:
        raise ValueError("joint_trajectory has no points")
    index = {n: i for i, n in enumerate(msg.joint_names)}
    missing = [n for n in names if n not in index]
    if missing:
        raise ValueError(f"joint_trajectory has no joint(s) {missing}; it names {list(msg.joint_names)}")
    positions = msg.points[-1].positions
    return np.asarray([positions[index[n]] for n in names], dtype=np.float64)
