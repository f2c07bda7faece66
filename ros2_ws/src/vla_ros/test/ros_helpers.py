"""Test helpers: start the nodes as docs/deploy.md starts them (the installed console script with ``--ros-args
--params-file config/<arm>.yaml -p name:=value``), and a plain rclpy client that talks to them over real
topics and services."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Bool, Float64MultiArray
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

PACKAGE = Path(__file__).resolve().parents[1]
CONFIG = PACKAGE / "config"
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


def executable(name: str) -> str:
    """The installed console script (``install/vla_ros/lib/vla_ros/<name>``), as ros2 launch runs it."""
    for base in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        path = Path(base) / "lib" / "vla_ros" / name
        if path.is_file():
            return str(path)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(f"{name}: not installed; colcon build the workspace and source install/setup.sh")


def node_command(name: str, params_file: Path, **params: object) -> list[str]:
    """The console script with ``--ros-args --params-file <params_file>`` and ``-p name:=value`` for each of
    ``params`` (the value as YAML, as a shell user types it), leaving out those given as ``''``."""
    cmd = [executable(name), "--ros-args", "--params-file", str(params_file)]
    for key, value in params.items():
        if value != "":
            cmd += ["-p", f"{key}:={json.dumps(value)}"]  # JSON is YAML
    return cmd


class NodeProcess:
    """A node in its own process; its output goes to ``log``. ``cmd`` is an argument list, or a shell
    command line (run as ``exec <cmd>`` by bash in ``cwd``, so the node itself gets the signals)."""

    def __init__(self, cmd: list[str] | str, log: Path, cwd: Path | None = None) -> None:
        if isinstance(cmd, str):
            cmd = ["bash", "-c", f"exec {cmd}"]
        self.log_path = log
        self._log = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, env=os.environ.copy(), cwd=cwd
        )

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.log_path.stem} exited ({self.proc.returncode}):\n{self.log()[-3000:]}")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()

    def stop(self, sig: int = signal.SIGINT, timeout: float = 15.0) -> float:
        """Send ``sig``, wait for the process to end (killed after ``timeout``); returns the time it took."""
        start = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        took = time.monotonic() - start
        if not self._log.closed:
            self._log.close()
        return took


class Client:
    """A plain rclpy node in the test process, spun in a background thread."""

    sensor_qos = qos_profile_sensor_data
    reliable_qos = RELIABLE

    def __init__(self, name: str = "vla_test_client", watch: list[NodeProcess] = ()) -> None:
        self.watch = list(watch)  # processes whose death fails a wait at once
        self.node = Node(name)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()

    def call(self, srv_type: Any, name: str, request: Any = None, timeout: float = 30.0) -> Any:
        client = self.node.create_client(srv_type, name)
        try:
            deadline = time.monotonic() + timeout
            while not client.wait_for_service(timeout_sec=0.5):
                for p in self.watch:
                    p.check_alive()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"service {name} not available within {timeout} s")
            future = client.call_async(request if request is not None else srv_type.Request())
            done = threading.Event()
            future.add_done_callback(lambda _: done.set())
            while not done.wait(0.5):
                for p in self.watch:
                    p.check_alive()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"service {name}: no answer within {timeout} s")
            return future.result()
        finally:
            self.node.destroy_client(client)

    def transition(self, node: str, transition_id: int, timeout: float = 120.0) -> bool:
        req = ChangeState.Request(transition=Transition(id=transition_id))
        return bool(self.call(ChangeState, f"/{node}/change_state", req, timeout).success)

    def state(self, node: str) -> str:
        return str(self.call(GetState, f"/{node}/get_state").current_state.label)

    def collect(self, msg_type: Any, topic: str, sensor: bool = False) -> list[tuple[float, Any]]:
        """Every message on ``topic`` from now on, with its arrival time (time.monotonic())."""
        box: list[tuple[float, Any]] = []
        qos = qos_profile_sensor_data if sensor else RELIABLE
        self.node.create_subscription(msg_type, topic, lambda m: box.append((time.monotonic(), m)), qos)
        return box

    def publisher(self, msg_type: Any, topic: str, sensor: bool = False) -> Any:
        return self.node.create_publisher(msg_type, topic, qos_profile_sensor_data if sensor else RELIABLE)

    def now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9


def wait_for(cond: Callable[[], Any], timeout: float, what: str, period: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(period)
    raise TimeoutError(f"timed out after {timeout} s waiting for {what}")


def diagnostics_value(msg: Any, key: str) -> str | None:
    for status in msg.status:
        for kv in status.values:
            if kv.key == key:
                return str(kv.value)
    return None


def init() -> None:
    if not rclpy.ok():
        rclpy.init()


def python() -> str:
    return sys.executable


PANDA = CONFIG / "panda.yaml"
CONFIGURE, ACTIVATE = Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_ACTIVATE
ARM_TOPIC = "/joint_trajectory_controller/joint_trajectory"
EXIT_TARGET_S = 1.0  # a signal ends vla_deploy (the arm held) within this, whatever the traffic
EXIT_LIMIT_S = 3.0  # what the tests allow: the target plus slack for a loaded CI machine


class Deployment:
    """sim_robot + vla_deploy processes and a client.

    :meth:`start` starts them as docs/deploy.md does: ``--params-file config/panda.yaml`` and, as ``-p``,
    only the documented parameters (vla_deploy: checkpoint, reset_service, success_topic; sim_robot: task,
    image_size, plus the scene the test policy was trained in) and those a test passes."""

    def __init__(self, tmp: Path, deploy: list[str] | str, sim: list[str] | str | None, cwd=None) -> None:
        self.sim = NodeProcess(sim, tmp / "sim.log", cwd) if sim else None
        self.node = NodeProcess(deploy, tmp / "deploy.log", cwd)
        self.client = Client(watch=[self.node] + ([self.sim] if self.sim else []))
        self.diagnostics = self.client.collect(DiagnosticArray, "/diagnostics")

    @classmethod
    def start(
        cls, tmp: Path, checkpoint: Path | str, scene: int, sim: bool = True, **deploy: object
    ) -> Deployment:
        sim_cmd = node_command(
            "sim_robot", PANDA, task="reach", seed=scene, seed_stride=0, image_size=[32, 32]
        )
        params = {
            "checkpoint": str(checkpoint),
            "reset_service": "/sim_robot/reset" if sim else "",
            "success_topic": "/sim_robot/success" if sim else "",
            **deploy,
        }
        return cls(tmp, node_command("vla_deploy", PANDA, **params), sim_cmd if sim else None)

    def up(self) -> None:
        assert self.client.transition("vla_deploy", CONFIGURE), self.node.log()[-3000:]
        assert self.client.transition("vla_deploy", ACTIVATE)

    def start_episode(self) -> str:
        """Start an episode; returns its number as the node reports it."""
        res = self.client.call(Trigger, "/vla_deploy/start_episode")
        assert res.success, res.message
        return res.message.split()[1]  # "episode <n> started"

    def wait_running(self, number: str, steps: int, timeout: float = 30.0) -> None:
        """Wait until /diagnostics shows episode ``number`` running at step ``steps`` or later."""

        def running() -> bool:
            return any(
                diagnostics_value(m, "episode") == number
                and diagnostics_value(m, "state") == "running"
                and int(diagnostics_value(m, "step") or 0) >= steps
                for _, m in list(self.diagnostics)
            )

        wait_for(running, timeout, f"episode {number} to run {steps} steps")

    def wait_ended(self, number: str, timeout: float = 30.0) -> dict[str, str]:
        """Wait until /diagnostics reports episode ``number`` over (``idle``: written, the arm holding; or
        ``failed``, with ``last_error``); returns that status."""

        def ended() -> dict[str, str] | None:
            for _, m in list(self.diagnostics):
                values = {kv.key: kv.value for kv in m.status[0].values}
                if values.get("episode") == number and values.get("state") in ("idle", "failed"):
                    return values
            return None

        return wait_for(ended, timeout, f"episode {number} to end")

    def episode(self, timeout: float = 30.0) -> dict[str, str]:
        """Start an episode and wait until the node reports it over; returns that status."""
        return self.wait_ended(self.start_episode(), timeout)

    def last(self) -> dict[str, str]:
        return {kv.key: kv.value for kv in self.diagnostics[-1][1].status[0].values}

    def close(self) -> None:
        self.client.close()
        self.node.stop()
        if self.sim is not None:
            self.sim.stop()


def check_signal_holds_and_exits(d: Deployment, sig: int, commands: list, joints: list) -> None:
    """The sim robot goes first (as with Ctrl-C on ``ros2 launch``; it must itself end within the limit), so
    no message reaches vla_deploy any more; then ``sig`` to vla_deploy: it holds the arm where /joint_states
    last reported it and exits, within :data:`EXIT_TARGET_S` by design (:data:`EXIT_LIMIT_S` allowed here).
    ``commands`` / ``joints``: the client's collections of the arm commands and joint states; the node must
    have measured the arm (an episode ran), else there is nothing to hold against."""
    import numpy as np

    assert d.sim is not None
    took = d.sim.stop(sig, timeout=10.0)
    print(f"sim_robot exited {took:.2f} s after signal {sig}")
    assert took <= EXIT_LIMIT_S, f"sim_robot took {took:.2f} s to exit on signal {sig}"
    reported = np.array([m.position[:7] for _, m in joints[-40:]])
    n = len(commands)
    time.sleep(0.3)  # nothing arrives at vla_deploy now
    took = d.node.stop(sig, timeout=10.0)
    print(f"vla_deploy exited {took:.2f} s after signal {sig} (target {EXIT_TARGET_S} s)")
    log = d.node.log()
    assert took <= EXIT_LIMIT_S, f"vla_deploy took {took:.2f} s to exit on signal {sig}:\n{log[-2000:]}"
    assert d.node.proc.returncode == 0, log[-3000:]
    wait_for(lambda: len(commands) > n, 2.0, "a hold command after the signal")
    held = np.asarray(commands[-1][1].points[0].positions)
    assert np.abs(reported - held).max(axis=1).min() < 1e-9, (held, reported[-1])


ARM_CAMERA = "/cameras/agentview/image_raw"
TOPICS = {
    "/joint_states": (JointState, "sensor_msgs/msg/JointState", False),
    "/cameras/agentview/image_raw": (Image, "sensor_msgs/msg/Image", True),
    "/cameras/wrist/image_raw": (Image, "sensor_msgs/msg/Image", True),
    ARM_TOPIC: (
        JointTrajectory,
        "trajectory_msgs/msg/JointTrajectory",
        False,
    ),
    "/gripper_position_controller/commands": (Float64MultiArray, "std_msgs/msg/Float64MultiArray", False),
    "/vla_deploy/policy_action": (Float64MultiArray, "std_msgs/msg/Float64MultiArray", False),
    "/vla_deploy/is_intervention": (Bool, "std_msgs/msg/Bool", False),
    "/sim_robot/success": (Bool, "std_msgs/msg/Bool", False),
}


class BagRecorder:
    """Raw (serialized) subscriptions, kept with their receive times and written at ``close`` to rosbag2
    bags, one per storage plugin (in the test's thread: sqlite3 handles stay in the thread that made them)."""

    def __init__(self, client, bags: dict[str, Path]) -> None:
        self.client, self.bags = client, bags
        self.messages: list[tuple[str, int, bytes]] = []
        self.lock = threading.Lock()
        for topic, (cls, _, sensor) in TOPICS.items():
            qos = client.sensor_qos if sensor else client.reliable_qos
            client.node.create_subscription(
                cls, topic, lambda raw, t=topic: self._keep(t, raw), qos, raw=True
            )

    def _keep(self, topic: str, raw: bytes) -> None:
        with self.lock:
            self.messages.append((topic, int(self.client.now() * 1e9), raw))

    def topics(self) -> set[str]:
        with self.lock:
            return {topic for topic, _, _ in self.messages}

    def close(self) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore

        store = get_typestore(Stores.ROS2_JAZZY)
        plugins = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
        with self.lock:
            messages = list(self.messages)
        for kind, path in self.bags.items():
            with Writer(path, version=9, storage_plugin=plugins[kind]) as w:
                conns = {t: w.add_connection(t, name, typestore=store) for t, (_, name, _) in TOPICS.items()}
                for topic, t, raw in messages:
                    w.write(conns[topic], t, raw)
