"""The nodes' ROS parameters: declared once, each with its description, read into typed dataclasses.

Arm-specific parameters (how the arm is named on ROS: joints, gripper joint, controllers, camera topics)
live in ``config/<arm>.yaml``, generated from the ``hardware/`` profiles (:func:`profile_params`;
``python -m vla_ros.params --write`` rewrites them; a test checks the committed files against it), so the
joint count, camera names and control rate have one source: the profile.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor

from hardware.profiles import PROFILES, get_profile
from hardware.ros_naming import COMMAND_INTERFACES, profile_params
from vla.robot import RobotProfile


@dataclass
class ArmParams:
    """How the arm appears on ROS (shared by the deploy node and the sim robot node)."""

    robot: str = "panda"  # a hardware/ profile: panda, fr3, ur5e, so101
    joint_names: tuple[str, ...] = ()  # ROS joint names of the profile's arm joints, in profile order
    gripper_joint: str = ""  # ROS joint name of the gripper in /joint_states ('' : the arm has none)
    joint_states_topic: str = "/joint_states"
    command_interface: str = "joint_trajectory"
    arm_controller: str = "joint_trajectory_controller"
    gripper_interface: str = "forward_position"
    gripper_controller: str = "gripper_position_controller"
    camera_topics: tuple[str, ...] = ()  # per profile camera, in order; a '/compressed' suffix: jpeg/png
    control_hz: float = 0.0  # 0: the profile's

    def profile(self) -> RobotProfile:
        return get_profile(self.robot)

    def check(self) -> None:
        """Raise if these names do not fit the profile (one line naming the parameter)."""
        p = self.profile()
        if len(self.joint_names) != p.arm_dim:
            raise ValueError(
                f"joint_names has {len(self.joint_names)} names; profile {p.name} has {p.arm_dim} joints"
            )
        if bool(self.gripper_joint) != (p.gripper is not None):
            raise ValueError(
                f"gripper_joint={self.gripper_joint!r}: profile {p.name} "
                f"{'has' if p.gripper is not None else 'has no'} gripper"
            )
        if len(self.camera_topics) != len(p.cameras):
            raise ValueError(
                f"camera_topics has {len(self.camera_topics)} topics for the profile's cameras "
                f"{list(p.camera_names)}"
            )
        for name in ("command_interface", "gripper_interface"):
            if getattr(self, name) not in COMMAND_INTERFACES:
                raise ValueError(f"{name}={getattr(self, name)!r}: use one of {COMMAND_INTERFACES}")
        if self.control_hz < 0:
            raise ValueError(f"control_hz={self.control_hz} must be >= 0 (0: the profile's)")

    @property
    def rate(self) -> float:
        return self.control_hz or self.profile().control_hz

    def command_topic(self, gripper: bool = False) -> str:
        controller = self.gripper_controller if gripper else self.arm_controller
        interface = self.gripper_interface if gripper else self.command_interface
        return f"/{controller}/" + ("joint_trajectory" if interface == "joint_trajectory" else "commands")


ARM_DESCRIPTIONS = {
    "robot": "arm profile in hardware/profiles (panda, fr3, ur5e, so101): limits, gripper, cameras, rate",
    "joint_names": "ROS joint names of the profile's arm joints, in profile order (matched by name)",
    "gripper_joint": "ROS joint name of the gripper in joint_states ('' when the arm has none)",
    "joint_states_topic": "sensor_msgs/JointState topic of the measured joints",
    "command_interface": "arm commands: joint_trajectory (JointTrajectoryController) or forward_position "
    "(Float64MultiArray to a forward position controller)",
    "arm_controller": "ros2_control controller of the arm: commands go to /<arm_controller>/...",
    "gripper_interface": "gripper commands: joint_trajectory or forward_position",
    "gripper_controller": "ros2_control controller of the gripper",
    "camera_topics": "one image topic per profile camera, in profile order (sensor_msgs/Image; a topic "
    "ending in /compressed: CompressedImage)",
    "control_hz": "control rate in Hz (0: the profile's)",
}


@dataclass
class DeployParams:
    """The deploy node's own parameters (beside :class:`ArmParams`)."""

    checkpoint: str = ""
    instruction: str = ""
    deploy_overrides: tuple[str, ...] = ()
    device: str = "cpu"
    cond: int = -1
    guidance: float = -1.0
    num_steps: int = 0
    imports: tuple[str, ...] = ("policies",)
    max_steps: int = 0
    record_dir: str = ""
    reset_service: str = ""
    success_topic: str = ""
    start_on_activate: bool = False
    inputs_timeout_s: float = 5.0
    diagnostics_hz: float = 2.0
    torch_threads: int = 1


DEPLOY_DESCRIPTIONS = {
    "checkpoint": "checkpoint folder (config.yaml, model.safetensors, stats.safetensors) loaded at configure",
    "instruction": "the language instruction (the ~/instruction topic replaces it; empty: the checkpoint's "
    "training instruction, deploy.yaml)",
    "deploy_overrides": "DeployConfig fields as dotted key=value, as vla-eval takes them after deploy. "
    "(e.g. horizon=3, safety.mode=hold, rtc.enabled=true); safety.mode defaults to hold",
    "device": "torch device of the policy",
    "cond": "advantage indicator 0/1 for conditioned policies (-1: the checkpoint's default)",
    "guidance": "classifier-free guidance scale (< 0: the checkpoint's default)",
    "num_steps": "flow integration steps (0: the checkpoint's default)",
    "imports": "python modules that register policy types",
    "max_steps": "control periods per episode before it ends by itself (0: until stopped or marked)",
    "record_dir": "LeRobotDataset folder for intervention collection ('' : no recording); each episode is "
    "committed atomically when it ends, a crash loses at most the episode in progress",
    "reset_service": "std_srvs/Trigger called before each episode (e.g. /sim_robot/reset; '' : none)",
    "success_topic": "std_msgs/Bool topic of a success detector: true marks the episode a success and ends "
    "it ('' : none; ~/mark_success does the same by hand)",
    "start_on_activate": "start an episode when the node activates",
    "inputs_timeout_s": "how long an episode start waits for fresh joint states and camera frames",
    "diagnostics_hz": "rate of the DiagnosticArray on /diagnostics",
    "torch_threads": "torch intra-op threads of the policy",
}


@dataclass
class SimParams:
    """The sim robot node's own parameters."""

    task: str = "reach"
    seed: int = 0
    seed_stride: int = 1
    image_size: tuple[int, ...] = (96, 96)
    stress_scenario: str = "none"
    stress_severity: float = 0.0


SIM_DESCRIPTIONS = {
    "task": "MuJoCo task (reach, pick_place, push, stack, drawer)",
    "seed": "scene seed at start-up and at the first ~/reset",
    "seed_stride": "each further ~/reset adds this to the seed (0: the same scene every episode)",
    "image_size": "rendered camera size [H, W]",
    "stress_scenario": "RoboStress execution-error scenario (sim.robostress; none: off)",
    "stress_severity": "RoboStress severity in [0, 1]",
}


def declare(node: Any, cls: type, descriptions: dict[str, str]) -> None:
    """Declare every field of dataclass ``cls`` on ``node``, with its default and description."""
    from rclpy.parameter import Parameter

    for f in fields(cls):
        default = list(f.default) if isinstance(f.default, tuple) else f.default
        descriptor = ParameterDescriptor(description=descriptions[f.name])
        if default != []:
            node.declare_parameter(f.name, default, descriptor)
            continue
        # ROS cannot infer an array's type from [], and an array declared by its type alone stays NOT_SET
        # (get_parameter raises "not initialized") until a value is given: then set it to an empty array
        kind = Parameter.Type(_array_kind(f.type))
        if node.declare_parameter(f.name, kind, descriptor).type_ == Parameter.Type.NOT_SET:
            node.set_parameters([Parameter(f.name, kind, [])])


def read[T](node: Any, cls: type[T]) -> T:
    """The current values of ``cls``'s parameters on ``node`` (arrays as tuples)."""
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        value = node.get_parameter(f.name).value
        if isinstance(f.default, tuple):
            value = tuple(value or ())
        values[f.name] = value
    return cls(**values)


def _array_kind(annotation: Any) -> int:
    """The parameter type of an array field."""
    from rclpy.parameter import Parameter

    text = str(annotation)
    if "tuple[int" in text:
        return Parameter.Type.INTEGER_ARRAY.value
    if "tuple[float" in text:
        return Parameter.Type.DOUBLE_ARRAY.value
    return Parameter.Type.STRING_ARRAY.value


def profile_yaml(name: str) -> str:
    """The text of ``config/<name>.yaml``: parameters for both nodes (``/**``: any node name)."""
    import yaml

    header = (
        f"# Generated from hardware/profiles/{name}.py by `python -m vla_ros.params --write`; do not\n"
        "# edit by hand (a test checks this file against the profile). Limits, gripper model and\n"
        "# kinematics stay in the profile; this file says how the arm is named on ROS.\n"
    )
    body = yaml.safe_dump({"/**": {"ros__parameters": profile_params(name)}}, sort_keys=False)
    return header + body


def main() -> None:
    ap = argparse.ArgumentParser(description="write or check config/<arm>.yaml against hardware/profiles")
    ap.add_argument("--write", action="store_true", help="rewrite the files (default: check them)")
    ap.add_argument("--config-dir", default=str(Path(__file__).resolve().parents[1] / "config"))
    args = ap.parse_args()
    stale = []
    for name in PROFILES.names():
        path = Path(args.config_dir) / f"{name}.yaml"
        text = profile_yaml(name)
        if args.write:
            path.write_text(text)
        elif not path.is_file() or path.read_text() != text:
            stale.append(str(path))
    if stale:
        raise SystemExit(f"out of date with hardware/profiles: {stale}; run python -m vla_ros.params --write")


if __name__ == "__main__":
    main()
