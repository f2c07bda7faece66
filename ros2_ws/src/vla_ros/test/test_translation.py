"""The node's translation layer (messages <-> arrays), its parameters and the launch files' contract."""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
from rclpy.parameter import Parameter
from ros_helpers import CONFIG, PACKAGE
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_msgs.msg import Float64MultiArray
from vla_ros.conversions import (
    array_to_image,
    decode_image,
    joint_positions,
    read_position_command,
    stamp,
    to_seconds,
    trajectory_command,
)
from vla_ros.deploy_node import deploy_config
from vla_ros.params import (
    ARM_DESCRIPTIONS,
    DEPLOY_DESCRIPTIONS,
    SIM_DESCRIPTIONS,
    ArmParams,
    DeployParams,
    SimParams,
    declare,
    profile_params,
    profile_yaml,
    read,
)

from hardware.ros_images import encode_compressed


def test_joint_states_are_matched_by_name_not_order():
    msg = JointState(name=["b", "gripper", "a"], position=[2.0, 0.04, 1.0], velocity=[0.2, 0.0, 0.1])
    q, dq = joint_positions(msg, ["a", "b"], velocities=True)
    assert q.tolist() == [1.0, 2.0] and dq.tolist() == [0.1, 0.2]
    with pytest.raises(KeyError, match=r"no joint\(s\) \['c'\]"):
        joint_positions(msg, ["a", "c"])
    q, dq = joint_positions(JointState(name=["a"], position=[1.0]), ["a"], velocities=True)
    assert dq is None  # a driver that reports no velocities


def test_images_decode_without_cv_bridge():
    rgb = np.random.default_rng(0).integers(0, 255, (4, 5, 3), dtype=np.uint8)
    assert np.array_equal(decode_image(array_to_image(rgb, 1.5)), rgb)
    bgr = Image(
        height=4, width=5, encoding="bgr8", step=15, data=np.ascontiguousarray(rgb[..., ::-1]).tobytes()
    )
    assert np.array_equal(decode_image(bgr), rgb)
    padded = np.zeros((4, 20), np.uint8)  # a driver's row padding (step > width * 3)
    padded[:, :15] = rgb.reshape(4, 15)
    msg = Image(height=4, width=5, encoding="rgb8", step=20, data=padded.tobytes())
    assert np.array_equal(decode_image(msg), rgb)
    mono = Image(height=4, width=5, encoding="mono8", step=5, data=rgb[..., 0].tobytes())
    assert np.array_equal(decode_image(mono), np.repeat(rgb[..., :1], 3, axis=2))
    png = CompressedImage(format="png", data=encode_compressed(rgb, "png"))
    assert np.array_equal(decode_image(png), rgb)
    assert decode_image(png, (8, 10)).shape == (8, 10, 3)  # resized to what the policy reads
    with pytest.raises(ValueError, match="encoding '16UC1' is not supported"):
        decode_image(Image(height=1, width=1, encoding="16UC1", step=2, data=b"\0\0"))
    with pytest.raises(ValueError, match="cannot decode"):
        decode_image(CompressedImage(format="jpeg", data=b"not a jpeg"))


def test_stamps_and_commands_round_trip():
    assert abs(to_seconds(stamp(1234.5678901)) - 1234.5678901) < 1e-9
    traj = trajectory_command(["j1", "j2"], np.array([0.1, -0.2]), 0.1)
    assert traj.points[0].time_from_start.nanosec == 100_000_000
    assert read_position_command(traj, ["j2", "j1"]).tolist() == [-0.2, 0.1]  # by name
    assert read_position_command(Float64MultiArray(data=[1.0, 2.0]), ["a", "b"]).tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="2 values for 3 joints"):
        read_position_command(Float64MultiArray(data=[1.0, 2.0]), ["a", "b", "c"])


@pytest.mark.parametrize("arm", ["panda", "fr3", "ur5e", "so101"])
def test_arm_configs_are_generated_from_the_profiles(arm):
    """config/<arm>.yaml is exactly what the hardware/ profile generates (one source of truth)."""
    import yaml

    path = CONFIG / f"{arm}.yaml"
    assert path.read_text() == profile_yaml(arm), "run: python -m vla_ros.params --write"
    params = yaml.safe_load(path.read_text())["/**"]["ros__parameters"]
    arm_params = ArmParams(**{k: tuple(v) if isinstance(v, list) else v for k, v in params.items()})
    arm_params.check()
    assert params == profile_params(arm)


def test_arm_params_refuse_names_that_do_not_fit_the_profile():
    base = profile_params("panda")
    with pytest.raises(ValueError, match="joint_names has 6 names; profile panda has 7"):
        ArmParams(**{**base, "joint_names": tuple(base["joint_names"][:6])}).check()
    with pytest.raises(ValueError, match="command_interface='effort'"):
        ArmParams(**{**base, "command_interface": "effort"}).check()


def test_every_parameter_reads_its_default_when_omitted():
    """Each node parameter, given no value, reads back its dataclass default. (An array declared by its type
    alone, as ROS needs for an empty default, stays NOT_SET in rclpy and reading it raises "not
    initialized".) Given a value, an empty-default array keeps its element type."""
    from rclpy.node import Node

    node = Node("vla_params_defaults")
    try:
        for cls, descriptions in (
            (ArmParams, ARM_DESCRIPTIONS),
            (DeployParams, DEPLOY_DESCRIPTIONS),
            (SimParams, SIM_DESCRIPTIONS),
        ):
            declare(node, cls, descriptions)
            assert read(node, cls) == cls()
        assert not node.set_parameters([Parameter("deploy_overrides", value=[1])])[0].successful
        assert node.set_parameters([Parameter("deploy_overrides", value=["horizon=3"])])[0].successful
        assert read(node, DeployParams).deploy_overrides == ("horizon=3",)
    finally:
        node.destroy_node()


def test_deploy_overrides_are_typed_and_safety_defaults_to_hold():
    cfg = deploy_config(["horizon=3"])
    assert cfg.horizon == 3 and cfg.safety.mode == "hold"
    assert deploy_config(["safety.mode=clamp"]).safety.mode == "clamp"
    with pytest.raises(ValueError, match=r"executor\.nope"):
        deploy_config(["executor.nope=1"])
    with pytest.raises(ValueError, match="not key=value"):
        deploy_config(["horizon"])
    with pytest.raises(ValueError, match=r"executor\.horizon= is now horizon="):  # the old spelling
        deploy_config(["executor.horizon=3"])
    with pytest.raises(ValueError, match=r"rtc\.enabled needs async_inference\.enabled"):
        deploy_config(["rtc.enabled=true"])


def _launch_dict_keys(path: Path) -> set[str]:
    """String keys of the dict literals in a launch file (the parameters it gives the nodes)."""
    keys = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Dict):
            keys |= {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return keys


def test_launch_files_name_only_declared_parameters_and_the_issue_arguments():
    launch = PACKAGE / "launch"
    declared = {f.name for cls in (ArmParams, DeployParams, SimParams) for f in fields(cls)}
    tree = ast.parse((launch / "deploy.launch.py").read_text())
    arguments = next(
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "ARGUMENTS"
    )
    names = {k.value for k in arguments.keys}
    assert {"checkpoint", "robot", "params_file", "use_sim", "record"} <= names
    given = _launch_dict_keys(launch / "deploy.launch.py") - names
    assert given <= declared, given - declared
    assert (launch / "sim.launch.py").is_file()


if importlib.util.find_spec("launch_ros") is not None:  # launch_ros is not on PyPI: collected where ROS is

    @pytest.mark.parametrize("name", ["deploy.launch.py", "sim.launch.py"])
    def test_launch_files_load(name):
        from launch.launch_description_sources import get_launch_description_from_python_launch_file

        description = get_launch_description_from_python_launch_file(str(PACKAGE / "launch" / name))
        assert description.entities
