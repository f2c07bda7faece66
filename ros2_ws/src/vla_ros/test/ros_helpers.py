"""Test helpers: start the nodes as launch starts them (the installed console script with ``--ros-args
--params-file``), and a plain rclpy client that talks to them over real topics and services."""

from __future__ import annotations

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
from std_srvs.srv import Trigger

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


class NodeProcess:
    """A node in its own process; its output goes to ``log``."""

    def __init__(self, name: str, params: list[str | Path], log: Path, extra: list[str] = ()) -> None:
        cmd = [executable(name), "--ros-args"]
        for p in params:
            cmd += ["--params-file", str(p)]
        cmd += list(extra)
        self.log_path = log
        self._log = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=os.environ.copy())

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

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


def write_params(path: Path, node: str, params: dict[str, Any]) -> Path:
    import yaml

    path.write_text(yaml.safe_dump({node: {"ros__parameters": params}}))
    return path


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


class Deployment:
    """sim_robot + vla_deploy processes and a client, as ``sim.launch.py`` would start them."""

    def __init__(
        self, tmp: Path, checkpoint: Path | str, scene: int, sim: bool = True, **deploy: object
    ) -> None:
        sim_params = write_params(
            tmp / "sim.yaml",
            "sim_robot",
            {"task": "reach", "seed": scene, "seed_stride": 0, "image_size": [32, 32]},
        )
        params = {
            "checkpoint": str(checkpoint),
            "instruction": "reach the red ball",
            "reset_service": "/sim_robot/reset",
            "success_topic": "/sim_robot/success",
            "max_steps": 60,
            "deploy_overrides": ["executor.horizon=4"],
            **deploy,
        }
        dep = write_params(tmp / "deploy.yaml", "vla_deploy", params)
        self.sim = NodeProcess("sim_robot", [PANDA, sim_params], tmp / "sim.log") if sim else None
        self.node = NodeProcess("vla_deploy", [PANDA, dep], tmp / "deploy.log")
        self.client = Client(watch=[self.node] + ([self.sim] if self.sim else []))
        self.diagnostics = self.client.collect(DiagnosticArray, "/diagnostics")

    def up(self) -> None:
        assert self.client.transition("vla_deploy", CONFIGURE), self.node.log()[-3000:]
        assert self.client.transition("vla_deploy", ACTIVATE)

    def start(self) -> str:
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

    def episode(self, timeout: float = 30.0) -> dict[str, str]:
        """Start an episode and wait until the node reports it over (written, the arm holding)."""
        number = self.start()

        def ended() -> bool:
            return any(
                diagnostics_value(m, "episode") == number and diagnostics_value(m, "state") == "idle"
                for _, m in list(self.diagnostics)
            )

        wait_for(ended, timeout, f"episode {number} to end")
        return self.last()

    def last(self) -> dict[str, str]:
        return {kv.key: kv.value for kv in self.diagnostics[-1][1].status[0].values}

    def close(self) -> None:
        self.client.close()
        self.node.stop()
        if self.sim is not None:
            self.sim.stop()
