"""rosbag2 recordings (MCAP or sqlite3) -> a validated LeRobotDataset episode, with the ``rosbags`` library
(no ROS install, no rclpy). ``vla-bag2dataset bag=<dir> profile=<arm> out=<dir>``.

One bag is one episode (record one bag per episode: ``ros2 bag record`` between ``~/start_episode`` and
``~/stop_episode``). Frames are taken on the control-rate grid from the first joint state to the last:

- ``observation.state``: the latest ``/joint_states`` at the frame time (profile joints matched by name, then
  the gripper joint);
- ``observation.images.<cam>``: the latest frame of each camera topic (Image or CompressedImage);
- ``action``: the arm (and gripper) command published during the period after the frame (what ran from
  that state); a period without a command repeats the previous one (the controller held it);
- ``complementary_info.policy_action``: the deploy node's ``~/policy_action`` in that period when recorded
  (else the action); ``complementary_info.is_intervention``: its ``~/is_intervention``, else the
  operator's ``~/intervention`` input;
- ``task``: ``instruction=``, else the node's last ``~/instruction`` in the bag;
- episode ``success``: true when ``success_topic`` reported true, or as given (``success=true|false``).

Names and topics come from the arm's ROS naming (:mod:`hardware.ros_naming`, the same as the node's
``config/<arm>.yaml``); ``params=<yaml>`` reads another parameters file instead.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from hardware.profiles import get_profile
from hardware.ros_images import decode_compressed, decode_raw
from hardware.ros_naming import profile_params
from vla.data.schema import (
    ACTION,
    DONE,
    IS_INTERVENTION,
    POLICY_ACTION,
    REWARD,
    STATE,
    TASK,
    EpisodeSpec,
    image_key,
)


@dataclass
class Bag2DatasetConfig:
    """``vla-bag2dataset`` options."""

    bag: str = ""  # a rosbag2 folder (metadata.yaml + .mcap or .db3)
    profile: str = "panda"  # the arm (hardware/profiles)
    out: str = ""  # the dataset folder (appended to when it exists)
    params: str | None = None  # a parameters YAML with the ROS names (default: the profile's naming)
    node: str = (
        "vla_deploy"  # the deploy node's name (its ~/policy_action, ~/is_intervention, ~/intervention)
    )
    instruction: str = ""  # default: the last ~/instruction in the bag
    success: bool | None = None  # the episode's label; None: from success_topic (false without one)
    success_topic: str | None = None  # a std_msgs/Bool success detector, e.g. /sim_robot/success
    image_size: list[int] | None = None  # [H, W] of the stored frames (default: the first frame's)
    control_hz: float | None = None  # the frame rate (default: the parameters' control_hz)
    progress: bool = True

    def __post_init__(self) -> None:
        if not self.bag or not self.out:
            raise ValueError("bag=<rosbag2 folder> and out=<dataset folder> are required")
        get_profile(self.profile)  # raises with the registered names


@dataclass
class Track:
    """One topic's messages in time order: receive times (s) and decoded values."""

    times: list[float] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)

    def latest(self, t: float) -> Any:
        i = bisect.bisect_right(self.times, t) - 1
        return None if i < 0 else self.values[i]

    def first_in(self, lo: float, hi: float) -> Any:
        i = bisect.bisect_right(self.times, lo)
        return self.values[i] if i < len(self.times) and self.times[i] <= hi else None


def _names(cfg: Bag2DatasetConfig) -> dict[str, Any]:
    names = profile_params(cfg.profile)
    if cfg.params:
        import yaml

        doc = yaml.safe_load(Path(cfg.params).read_text())
        for section in doc.values():
            names.update(section.get("ros__parameters", {}))
    return names


def _stamp(msg: Any, receive_ns: int) -> float:
    header = getattr(msg, "header", None)
    if header is not None and (header.stamp.sec or header.stamp.nanosec):
        return header.stamp.sec + header.stamp.nanosec * 1e-9
    return receive_ns * 1e-9


def read_bag(cfg: Bag2DatasetConfig) -> tuple[dict[str, Track], dict[str, Any]]:
    """Decode the topics of the episode from the bag into :class:`Track` s (keys: joints, cam:<name>,
    arm, gripper, policy_action, is_intervention, intervention, success)."""
    from rosbags.highlevel import AnyReader

    names = _names(cfg)
    profile = get_profile(cfg.profile)
    joint_names = list(names["joint_names"])
    gripper_joint = names.get("gripper_joint") or ""

    def command_topic(gripper: bool) -> str:
        controller = names["gripper_controller" if gripper else "arm_controller"]
        interface = names["gripper_interface" if gripper else "command_interface"]
        return f"/{controller}/" + ("joint_trajectory" if interface == "joint_trajectory" else "commands")

    topics: dict[str, str] = {names["joint_states_topic"]: "joints", command_topic(False): "arm"}
    if profile.gripper is not None:
        topics[command_topic(True)] = "gripper"
    for cam, topic in zip(profile.camera_names, names["camera_topics"], strict=True):
        topics[topic] = f"cam:{cam}"
    node = cfg.node.strip("/")
    topics.update(
        {
            f"/{node}/policy_action": "policy_action",
            f"/{node}/is_intervention": "is_intervention",
            f"/{node}/intervention": "intervention",
            f"/{node}/instruction": "instruction",
        }
    )
    if cfg.success_topic:
        topics[cfg.success_topic] = "success"
    tracks: dict[str, Track] = {}
    path = Path(cfg.bag)
    if not (path / "metadata.yaml").is_file():
        raise FileNotFoundError(f"{path}: not a rosbag2 folder (no metadata.yaml)")
    with AnyReader([path]) as reader:
        conns = [c for c in reader.connections if c.topic in topics]
        if not any(topics[c.topic] == "joints" for c in conns):
            raise ValueError(
                f"{path}: no {names['joint_states_topic']} in the bag; it has "
                f"{sorted({c.topic for c in reader.connections})}"
            )
        total = sum(c.msgcount for c in conns)
        for conn, t_ns, raw in tqdm(
            reader.messages(connections=conns), total=total, desc="read bag", disable=not cfg.progress
        ):
            kind = topics[conn.topic]
            msg = reader.deserialize(raw, conn.msgtype)
            value = _decode(kind, msg, conn.msgtype, joint_names, gripper_joint, cfg.image_size)
            if value is None:
                continue
            track = tracks.setdefault(kind, Track())
            t = _stamp(msg, t_ns) if kind == "joints" or kind.startswith("cam:") else t_ns * 1e-9
            track.times.append(t)
            track.values.append(value)
    for track in tracks.values():  # stamps may arrive out of order across publishers
        order = np.argsort(track.times, kind="stable")
        track.times = [track.times[i] for i in order]
        track.values = [track.values[i] for i in order]
    return tracks, names


def _decode(kind, msg, msgtype, joint_names, gripper_joint, image_size) -> Any:
    if kind == "joints":
        index = {n: i for i, n in enumerate(msg.name)}
        if any(n not in index for n in joint_names):
            return None  # another publisher's joints on the topic
        q = [msg.position[index[n]] for n in joint_names]
        if gripper_joint:
            if gripper_joint not in index:
                return None
            q.append(msg.position[index[gripper_joint]])
        return np.asarray(q, dtype=np.float32)
    if kind.startswith("cam:"):
        size = tuple(image_size) if image_size else None
        data = np.asarray(msg.data, dtype=np.uint8).tobytes()
        if msgtype.endswith("CompressedImage"):
            return decode_compressed(data, size)
        return decode_raw(data, msg.height, msg.width, msg.step, msg.encoding, size)
    if kind in ("arm", "gripper"):
        names = joint_names if kind == "arm" else [gripper_joint]
        if msgtype.endswith("JointTrajectory"):
            if not msg.points:
                return None
            index = {n: i for i, n in enumerate(msg.joint_names)}
            return np.asarray([msg.points[-1].positions[index[n]] for n in names], dtype=np.float32)
        return np.asarray(msg.data, dtype=np.float32)
    if kind == "instruction":
        return str(msg.data)
    if kind == "policy_action":
        return np.asarray(msg.data, dtype=np.float32) if len(msg.data) else None
    return bool(msg.data)  # is_intervention, intervention, success


def bag_to_dataset(cfg: Bag2DatasetConfig) -> tuple[Path, int]:
    """Convert ``cfg.bag`` into one episode appended to ``cfg.out``; returns (dataset, frames).

    Raises:
        FileNotFoundError / ValueError: The bag is missing, lacks the joint states or camera topics, or
            holds no arm command (each message names the topic).
    """
    from vla.data.validate import validate_dataset
    from vla.data.writer import EpisodeWriter

    profile = get_profile(cfg.profile)
    tracks, names = read_bag(cfg)
    cams = list(profile.camera_names)
    missing = [names["camera_topics"][i] for i, c in enumerate(cams) if f"cam:{c}" not in tracks]
    if missing:
        raise ValueError(f"{cfg.bag}: no frames on camera topic(s) {missing}")
    if "arm" not in tracks:
        raise ValueError(f"{cfg.bag}: no arm commands ({names['arm_controller']}) in the bag")
    instruction = cfg.instruction or (tracks["instruction"].values[-1] if "instruction" in tracks else "")
    if not instruction:
        raise ValueError(
            f"{cfg.bag}: no /{cfg.node.strip('/')}/instruction in the bag; pass instruction=<text>"
        )
    hz = cfg.control_hz or float(names["control_hz"])
    dt = 1.0 / hz
    joints = tracks["joints"]
    grid = np.arange(joints.times[0], joints.times[-1] + 1e-9, dt)
    first = {c: tracks[f"cam:{c}"].values[0] for c in cams}
    spec = EpisodeSpec(
        cameras={c: first[c].shape[:2] for c in cams},
        state_dim=profile.action_dim,
        action_dim=profile.action_dim,
        fps=max(1, round(hz)),
        robot_type=profile.name,
        state_names=list(profile.action_names),
        action_names=list(profile.action_names),
    )
    frames = []
    action = None
    for k, t0 in enumerate(grid):
        t = t0 + 0.01 * dt  # a message stamped at the grid time belongs to its frame (float rounding)
        state = joints.latest(t)
        arm = tracks["arm"].first_in(t, t + dt)
        grip = tracks["gripper"].first_in(t, t + dt) if "gripper" in tracks else None
        if action is None:  # before the first command: the controller holds the measured position
            action = state.copy()
        action = action.copy()
        if arm is not None:
            action[: profile.arm_dim] = arm
        if grip is not None and profile.gripper is not None:
            action[profile.arm_dim] = grip[0]
        proposal = tracks["policy_action"].first_in(t, t + dt) if "policy_action" in tracks else None
        flag = _latest_flag(tracks, t + dt)
        frames.append(
            {
                **{image_key(c): _latest_image(tracks[f"cam:{c}"], t, first[c]) for c in cams},
                STATE: state,
                ACTION: action,
                POLICY_ACTION: action.copy() if proposal is None else proposal,
                IS_INTERVENTION: np.array([flag]),
                REWARD: np.array([0.0], dtype=np.float32),
                DONE: np.array([k == len(grid) - 1]),
                TASK: instruction,
            }
        )
    success = cfg.success
    if success is None:
        success = bool("success" in tracks and any(tracks["success"].values))
    out = Path(cfg.out)
    with EpisodeWriter(out, spec, resume=out.exists()) as writer:
        for frame in frames:
            writer.add_frame(frame)
        writer.end_episode(
            success=success,
            source="policy",
            extra={"bag": str(Path(cfg.bag).resolve()), "robot": profile.name},
        )
    validate_dataset(out)  # raises naming the file and field when something is off
    return out, len(frames)


def _latest_image(track: Track, t: float, fallback: np.ndarray) -> np.ndarray:
    image = track.latest(t)
    return fallback if image is None else image


def _latest_flag(tracks: dict[str, Track], t: float) -> bool:
    for key in ("is_intervention", "intervention"):
        if key in tracks:
            return bool(tracks[key].latest(t))
    return False
