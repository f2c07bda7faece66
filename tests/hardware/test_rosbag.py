"""``vla-bag2dataset`` on bags this test writes with ``rosbags`` (no ROS install): frames on the control
grid, actions from the period after each frame, flags, images (raw and compressed), and refusals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from hardware.profiles import get_profile
from hardware.ros_images import encode_compressed
from hardware.ros_naming import profile_params
from hardware.rosbag import Bag2DatasetConfig, bag_to_dataset

STORE = get_typestore(Stores.ROS2_JAZZY)
NAMES = profile_params("panda")
DT = 0.1
T0 = 1_700_000_000.0


def _time(t: float):
    Time = STORE.types["builtin_interfaces/msg/Time"]
    sec = int(t)
    return Time(sec=sec, nanosec=round((t - sec) * 1e9))


def _header(t: float, frame: str = ""):
    return STORE.types["std_msgs/msg/Header"](stamp=_time(t), frame_id=frame)


def _image(t: float, value: int, compressed: bool):
    img = np.full((8, 8, 3), value, np.uint8)
    if compressed:
        return STORE.types["sensor_msgs/msg/CompressedImage"](
            header=_header(t), format="png", data=np.frombuffer(encode_compressed(img), np.uint8)
        )
    return STORE.types["sensor_msgs/msg/Image"](
        header=_header(t), height=8, width=8, encoding="rgb8", is_bigendian=0, step=24, data=img.reshape(-1)
    )


def write_bag(path: Path, storage: StoragePlugin, steps: int = 10, compressed: bool = False) -> np.ndarray:
    """A 10 Hz episode: joint i at period k is the Panda's home pose + 0.1 * i + 0.01 * k (inside its joint
    ranges; names reordered), commands = the next state, the operator engaged for periods 3..5. Returns the
    arm states [steps, 7]."""
    T = STORE.types
    joints = list(NAMES["joint_names"])
    cam_type = "sensor_msgs/msg/CompressedImage" if compressed else "sensor_msgs/msg/Image"
    home = np.array(get_profile("panda").home)
    states = np.array([home + 0.1 * np.arange(7) + 0.01 * k for k in range(steps)])
    with Writer(path, version=9, storage_plugin=storage) as w:
        conns = {
            "js": w.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=STORE),
            "cmd": w.add_connection(
                "/joint_trajectory_controller/joint_trajectory",
                "trajectory_msgs/msg/JointTrajectory",
                typestore=STORE,
            ),
            "grip": w.add_connection(
                "/gripper_position_controller/commands", "std_msgs/msg/Float64MultiArray", typestore=STORE
            ),
            "flag": w.add_connection("/vla_deploy/is_intervention", "std_msgs/msg/Bool", typestore=STORE),
        }
        cams = {}
        for c, topic in zip(("agentview", "wrist"), NAMES["camera_topics"], strict=True):
            topic = topic + "/compressed" if compressed else topic
            cams[c] = w.add_connection(topic, cam_type, typestore=STORE)

        def put(conn, t, msg, kind):
            w.write(conn, int(t * 1e9), STORE.serialize_cdr(msg, kind))

        for k in range(steps):
            t = T0 + k * DT
            order = [*reversed(joints), NAMES["gripper_joint"]]  # a driver's own order: matched by name
            pos = [*states[k][::-1], 0.02]
            js = T["sensor_msgs/msg/JointState"](
                header=_header(t),
                name=order,
                position=np.array(pos),
                velocity=np.zeros(8),
                effort=np.zeros(0),
            )
            put(conns["js"], t, js, "sensor_msgs/msg/JointState")
            for i, conn in enumerate(cams.values()):
                put(conn, t, _image(t, 10 * k + i, compressed), cam_type)
            if k + 1 < steps:  # the command sent in the period after the frame: the next state
                Duration = T["builtin_interfaces/msg/Duration"]
                point = T["trajectory_msgs/msg/JointTrajectoryPoint"](
                    positions=states[k + 1].copy(),
                    velocities=np.zeros(0),
                    accelerations=np.zeros(0),
                    effort=np.zeros(0),
                    time_from_start=Duration(sec=0, nanosec=100_000_000),
                )
                traj = T["trajectory_msgs/msg/JointTrajectory"](
                    header=_header(0.0), joint_names=joints, points=[point]
                )
                put(conns["cmd"], t + 0.03, traj, "trajectory_msgs/msg/JointTrajectory")
                Layout = T["std_msgs/msg/MultiArrayLayout"]
                grip = T["std_msgs/msg/Float64MultiArray"](
                    layout=Layout(dim=[], data_offset=0), data=np.array([0.01])
                )
                put(conns["grip"], t + 0.03, grip, "std_msgs/msg/Float64MultiArray")
                flag = T["std_msgs/msg/Bool"](data=3 <= k <= 5)
                put(conns["flag"], t + 0.03, flag, "std_msgs/msg/Bool")
    return states


@pytest.mark.parametrize("storage", [StoragePlugin.MCAP, StoragePlugin.SQLITE3])
def test_bag_becomes_a_validated_episode(tmp_path, storage):
    from vla.data.reader import load_episode

    states = write_bag(tmp_path / "bag", storage)
    out, n = bag_to_dataset(
        Bag2DatasetConfig(
            bag=str(tmp_path / "bag"), out=str(tmp_path / "ds"), instruction="x", progress=False
        )
    )
    assert n == len(states)
    frames = load_episode(out, 0)
    np.testing.assert_allclose(frames["observation.state"][:, :7], states, atol=1e-6)
    np.testing.assert_allclose(frames["observation.state"][:, 7], 0.02, atol=1e-7)
    # the action of frame k is the command sent during period k (the next state); the last repeats it
    np.testing.assert_allclose(frames["action"][:-1, :7], states[1:], atol=1e-6)
    np.testing.assert_allclose(frames["action"][-1, :7], states[-1], atol=1e-6)
    assert frames["complementary_info.is_intervention"].ravel().tolist() == [3 <= k <= 5 for k in range(10)]
    assert frames["observation.images.agentview"][4].mean() == pytest.approx(40, abs=0.5)


def test_compressed_images_and_appending(tmp_path):
    write_bag(tmp_path / "bag", StoragePlugin.MCAP, compressed=True)
    cfg = Bag2DatasetConfig(
        bag=str(tmp_path / "bag"),
        out=str(tmp_path / "ds"),
        progress=False,
        params=None,
        image_size=[4, 4],
        success=True,
        instruction="reach",
    )
    _with_compressed_topics(cfg, tmp_path)
    bag_to_dataset(cfg)
    out, _ = bag_to_dataset(cfg)  # a second bag appends a second episode
    from vla.data.validate import validate_dataset

    report = validate_dataset(out, profiles="hardware.profiles")  # the joint ranges of the bag's profile
    assert report.num_episodes == 2


def _with_compressed_topics(cfg: Bag2DatasetConfig, tmp_path: Path) -> None:
    import yaml

    topics = [t + "/compressed" for t in NAMES["camera_topics"]]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": {"camera_topics": topics}}}))
    cfg.params = str(path)


def test_cli_refuses_what_is_not_a_bag_in_one_line(tmp_path):
    cli = Path(sys.executable).parent / "vla-bag2dataset"
    res = subprocess.run(
        [cli, f"bag={tmp_path}", "profile=panda", f"out={tmp_path / 'ds'}"], capture_output=True, text=True
    )
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "not a rosbag2 folder" in res.stderr
    assert not (tmp_path / "ds").exists()
    with Writer(tmp_path / "empty", version=9, storage_plugin=StoragePlugin.MCAP) as w:
        w.add_connection("/other", "std_msgs/msg/Bool", typestore=STORE)
    res = subprocess.run(
        [cli, f"bag={tmp_path / 'empty'}", "profile=panda", f"out={tmp_path / 'ds'}"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2 and "no /joint_states in the bag" in res.stderr, res.stderr
