"""How each arm is named on ROS (joints, gripper joint, controllers, camera topics): the ``config/<arm>.yaml``
parameters of the ROS 2 package (``ros2_ws/src/vla_ros``), generated from the profiles here so the joint
count, cameras and rate have one source. No rclpy: ``vla-bag2dataset`` reads recorded bags with the same
names."""

from __future__ import annotations

from typing import Any

from hardware.profiles import get_profile

COMMAND_INTERFACES = ("joint_trajectory", "forward_position")

# ROS naming of each arm (what its ros2_control set-up calls things); the profile gives the rest
ROS_NAMING: dict[str, dict[str, Any]] = {
    "panda": {
        "joint_names": [f"panda_joint{i}" for i in range(1, 8)],  # franka_description
        "gripper_joint": "panda_finger_joint1",
        "arm_controller": "joint_trajectory_controller",
        "command_interface": "joint_trajectory",
        "gripper_controller": "gripper_position_controller",
        "gripper_interface": "forward_position",
    },
    "fr3": {
        "joint_names": [f"fr3_joint{i}" for i in range(1, 8)],  # franka_ros2
        "gripper_joint": "fr3_finger_joint1",
        "arm_controller": "joint_trajectory_controller",
        "command_interface": "joint_trajectory",
        "gripper_controller": "gripper_position_controller",
        "gripper_interface": "forward_position",
    },
    "ur5e": {  # Universal_Robots_ROS2_Driver
        "joint_names": None,  # the profile's names are the driver's
        "gripper_joint": "robotiq_85_left_knuckle_joint",
        "arm_controller": "scaled_joint_trajectory_controller",
        "command_interface": "joint_trajectory",
        "gripper_controller": "gripper_position_controller",
        "gripper_interface": "forward_position",
    },
    "so101": {  # a forward position controller over the bus servos
        "joint_names": None,
        "gripper_joint": "gripper",
        "arm_controller": "arm_position_controller",
        "command_interface": "forward_position",
        "gripper_controller": "gripper_position_controller",
        "gripper_interface": "forward_position",
    },
}
# an arm without an entry: the profile's joint names, a JointTrajectoryController, a forward gripper
DEFAULT_NAMING: dict[str, Any] = {
    **ROS_NAMING["so101"],
    "command_interface": "joint_trajectory",
    "arm_controller": "joint_trajectory_controller",
}


def profile_params(name: str) -> dict[str, Any]:
    """The ``config/<arm>.yaml`` parameters of profile ``name`` (ROS naming from :data:`ROS_NAMING`)."""
    p = get_profile(name)
    naming = ROS_NAMING.get(name, DEFAULT_NAMING)
    return {
        "robot": p.name,
        "joint_names": list(naming["joint_names"] or p.joints),
        "gripper_joint": naming["gripper_joint"] if p.gripper is not None else "",
        "joint_states_topic": "/joint_states",
        "command_interface": naming["command_interface"],
        "arm_controller": naming["arm_controller"],
        "gripper_interface": naming["gripper_interface"],
        "gripper_controller": naming["gripper_controller"],
        "camera_topics": [f"/cameras/{c}/image_raw" for c in p.camera_names],
        "control_hz": float(p.control_hz),
    }
