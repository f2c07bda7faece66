"""``sim_robot``: our MuJoCo arm behind ROS topics, as ros2_control would present a real one.

- publishes ``/joint_states`` (sensor_msgs/JointState: positions and velocities, ROS joint names from the
  arm's ``config/<arm>.yaml``) and one ``sensor_msgs/Image`` per camera, each stamped with the time its
  state was captured;
- takes arm commands the way the arm's controller does (``/<arm_controller>/joint_trajectory``, a
  JointTrajectoryController's topic, or ``/<arm_controller>/commands``, a forward position controller's)
  and the gripper's on its own controller; the latest command is the position target until a new one
  comes, so a silent commander leaves the arm holding (as a JointTrajectoryController does);
- steps the physics on a wall-clock timer at the control rate, optionally under a RoboStress
  execution-error scenario, and reports the task's success on ``~/success`` (std_msgs/Bool), which the
  deploy node can take as its success detector;
- ``~/reset`` (std_srvs/Trigger) places a new scene (seed ``seed``, then ``seed + 1``, ...).

The whole ROS loop then runs without hardware: ``ros2 launch vla_ros sim.launch.py``.
"""

from __future__ import annotations

import threading

import numpy as np
import rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Bool, Float64MultiArray
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from vla_ros.conversions import array_to_image, read_position_command, stamp
from vla_ros.params import ARM_DESCRIPTIONS, SIM_DESCRIPTIONS, ArmParams, SimParams, declare, read

RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


class SimRobotNode(Node):
    """See the module docstring."""

    def __init__(self, name: str = "sim_robot") -> None:
        super().__init__(name)
        import sim  # noqa: F401  (MuJoCo's GL backend is chosen on import)
        from sim.env import EnvConfig, TabletopEnv
        from sim.robostress import StressConfig, apply_stress

        declare(self, ArmParams, ARM_DESCRIPTIONS)
        declare(self, SimParams, SIM_DESCRIPTIONS)
        self.arm, self.opts = read(self, ArmParams), read(self, SimParams)
        self.arm.check()
        self.profile = self.arm.profile()
        env_cfg = EnvConfig(
            task=self.opts.task,
            image_size=tuple(int(v) for v in self.opts.image_size),
            cameras=list(self.profile.camera_names),
            control_hz=self.arm.rate,
            max_steps=2**31 - 1,  # a robot runs until it is stopped
        )
        scenario = self.opts.stress_scenario
        stress = StressConfig(
            scenario=None if scenario in ("", "none") else scenario, severity=self.opts.stress_severity
        )
        self.env = apply_stress(TabletopEnv(env_cfg), stress)
        self._lock = threading.Lock()
        self._resets = 0
        self._seed = self.opts.seed
        self._target: np.ndarray | None = None
        self._success = False
        self.command_errors: list[str] = []
        self._reset_scene()

        n, a = self.profile.arm_dim, self.arm
        self._joints_pub = self.create_publisher(JointState, a.joint_states_topic, RELIABLE)
        self._image_pubs = {
            c: self.create_publisher(Image, t, qos_profile_sensor_data)
            for c, t in zip(self.profile.camera_names, a.camera_topics, strict=True)
        }
        self._success_pub = self.create_publisher(Bool, "~/success", RELIABLE)
        kind = JointTrajectory if a.command_interface == "joint_trajectory" else Float64MultiArray
        self.create_subscription(
            kind, a.command_topic(), lambda m: self._on_command(m, slice(0, n)), RELIABLE
        )
        if self.profile.gripper is not None:
            kind = JointTrajectory if a.gripper_interface == "joint_trajectory" else Float64MultiArray
            self.create_subscription(
                kind, a.command_topic(gripper=True), lambda m: self._on_command(m, slice(n, n + 1)), RELIABLE
            )
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_timer(1.0 / self.arm.rate, self._tick)
        self._publish()
        self.get_logger().info(
            f"sim {self.opts.task} as {self.profile.name} at {self.arm.rate:g} Hz: joint states on "
            f"{a.joint_states_topic}, commands on {a.command_topic()}"
        )

    # ---- scene -------------------------------------------------------------------------------------------
    def _reset_scene(self) -> None:
        with self._lock:
            self._obs, _ = self.env.reset(seed=self._seed)
            self._target = np.asarray(self._obs["state"], dtype=np.float64).copy()  # hold where it starts
            self._success = False
            self._stamp = self._now()

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self._seed = self.opts.seed + self.opts.seed_stride * self._resets  # 1st reset: seed again
        self._resets += 1
        self._reset_scene()
        self._publish()
        response.success, response.message = True, f"scene seed {self._seed}"
        return response

    # ---- the controller ----------------------------------------------------------------------------------
    def _on_command(self, msg, part: slice) -> None:
        names = list(self.arm.joint_names) if part.start == 0 else [self.arm.gripper_joint]
        try:
            target = read_position_command(msg, names)
        except ValueError as exc:
            self.command_errors.append(str(exc))
            self.get_logger().warning(f"command ignored: {exc}", throttle_duration_sec=1.0)
            return
        if not np.all(np.isfinite(target)):
            self.get_logger().warning("command ignored: non-finite values", throttle_duration_sec=1.0)
            return
        with self._lock:
            assert self._target is not None
            self._target[part] = target

    def _tick(self) -> None:
        with self._lock:
            assert self._target is not None
            self._obs, _, _, _, info = self.env.step(self._target.astype(np.float32))
            self._success = self._success or bool(info["success"])
            self._stamp = self._now()
        self._publish()

    def _publish(self) -> None:
        with self._lock:
            obs, t, success = self._obs, self._stamp, self._success
            dq = self.env.joint_velocity()
        n = self.profile.arm_dim
        state = np.asarray(obs["state"], dtype=np.float64)
        msg = JointState(
            name=list(self.arm.joint_names) + ([self.arm.gripper_joint] if self.arm.gripper_joint else []),
            position=[float(v) for v in state[: self.profile.action_dim]],
            velocity=[float(v) for v in dq[:n]] + ([0.0] if self.arm.gripper_joint else []),
        )
        msg.header.stamp = stamp(t)
        self._joints_pub.publish(msg)
        for cam, pub in self._image_pubs.items():
            pub.publish(array_to_image(obs[cam], t, frame_id=cam))
        self._success_pub.publish(Bool(data=success))

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9


def main(args: list[str] | None = None) -> None:
    rclpy.init(args=args)
    node = SimRobotNode()
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        pass
    finally:
        node.env.close()
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()


if __name__ == "__main__":
    main()
