"""The deploy node and the sim robot node in separate processes, over real topics and services."""

from __future__ import annotations

import shutil
import signal
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState
from rcl_interfaces.srv import SetParameters
from rclpy.parameter import Parameter
from ros_helpers import (
    ACTIVATE,
    ARM_TOPIC,
    CONFIGURE,
    EXIT_LIMIT_S,
    Client,
    check_signal_holds_and_exits,
    wait_for,
)
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from vla.runtime.defaults import DeployDefaults

JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
INSTRUCTION = "reach the red ball"  # what the test policy was trained with (the sim's reach task)
DEACTIVATE, CLEANUP = Transition.TRANSITION_DEACTIVATE, Transition.TRANSITION_CLEANUP


def test_reach_episode_succeeds_between_processes(deployment, tmp_path):
    """A trained policy acts through the node on the sim arm and reaches the ball; the episode is
    recorded, and a plain client observes joint states and the node's diagnostics."""
    from vla.data.validate import validate_dataset

    d = deployment(record_dir=str(tmp_path / "rec"), instruction=INSTRUCTION, max_steps=60)
    joints = d.client.collect(JointState, "/joint_states")
    commands = d.client.collect(JointTrajectory, ARM_TOPIC)
    d.up()
    state = d.episode()
    assert state["last_success"] == "true", (state, d.node.log()[-2000:])
    assert state["safety"] == "ok" and float(state["inference_latency_ms"]) > 0
    assert joints and commands and list(commands[-1][1].joint_names) == JOINTS
    report = validate_dataset(tmp_path / "rec")
    assert report.num_episodes == 1 and report.num_frames >= 3


def test_refused_configure_wrong_transitions_and_failed_episodes_leave_the_node_up(
    deployment, tmp_path, reach_checkpoint
):
    """No robot at all (so nothing arrives but the client's requests). A bad checkpoint, and recording with
    no instruction from the parameter or the checkpoint, are refused at configure with one line each; a
    recording checkpoint trained on one task takes its instruction; a transition the state does not offer is
    refused (success=false, one line) and the node stays in its state; an episode that fails (no inputs) is
    reported on /diagnostics; SIGINT ends the node though nothing wakes its executor."""
    rec = tmp_path / "rec"
    d = deployment(
        sim=False,
        checkpoint=str(tmp_path / "no_such_checkpoint"),
        record_dir=str(rec),
        inputs_timeout_s=0.5,
        diagnostics_hz=0.0,  # no timer either
    )
    assert not d.client.transition("vla_deploy", CONFIGURE)
    _wait_line(d, "configure failed", "no_such_checkpoint")
    assert not d.client.transition("vla_deploy", ACTIVATE)  # not offered when unconfigured
    _wait_line(d, "transition 3 is not available in state unconfigured")
    by_label = ChangeState.Request(transition=Transition(label="deactivate"))
    assert not d.client.call(ChangeState, "/vla_deploy/change_state", by_label).success
    assert d.client.state("vla_deploy") == "unconfigured"
    services = [name for name, _ in d.client.node.get_service_names_and_types()]
    assert "/vla_deploy/change_state" in services
    assert "/vla_deploy/start_episode" not in services  # episode services exist only once configured

    trained = DeployDefaults.load(reach_checkpoint)
    assert trained is not None and trained.instruction  # its data's most frequent instruction
    untold = tmp_path / "untold"  # a checkpoint that names no training instruction
    shutil.copytree(reach_checkpoint, untold)
    replace(trained, instruction=None).save(untold)
    _set(d, checkpoint=str(untold))
    assert not d.client.transition("vla_deploy", CONFIGURE)
    _wait_line(d, "configure failed", "record_dir=" + str(rec), "pass instruction:=")

    _set(d, checkpoint=str(reach_checkpoint))
    d.up()  # records with the checkpoint's instruction
    _wait_line(d, "configured:", f"instruction '{trained.instruction}' (checkpoint)")
    state = d.episode()  # no joint states or frames: the episode cannot start
    assert state["state"] == "failed" and state["last_error"].startswith("not started: no fresh"), state
    assert d.diagnostics[-1][1].status[0].message.startswith("failed: not started")
    assert not d.client.transition("vla_deploy", CONFIGURE)  # not offered when active
    assert d.client.state("vla_deploy") == "active"

    took = d.node.stop(signal.SIGINT, timeout=10.0)
    assert took <= EXIT_LIMIT_S and d.node.proc.returncode == 0, (took, d.node.log()[-2000:])


def _wait_line(d, *parts: str) -> str:
    """The node's log line that holds every one of ``parts``."""

    def line() -> str | None:
        return next((x for x in d.node.log().splitlines() if all(p in x for p in parts)), None)

    return wait_for(line, 10, f"a log line with {parts}")


def _set(d, **params: object) -> None:
    """Set vla_deploy's parameters over its ~/set_parameters service (as ``ros2 param set`` does)."""
    req = SetParameters.Request(
        parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in params.items()]
    )
    results = d.client.call(SetParameters, "/vla_deploy/set_parameters", req).results
    assert all(r.successful for r in results), results


def test_lifecycle_transitions_hold_the_arm(deployment):
    """Deactivate holds the arm; cleanup and configure again; then SIGTERM mid-episode with the sim gone and
    no timer (diagnostics off): nothing wakes the node's executor, yet it holds the arm and exits."""
    d = deployment(max_steps=0, diagnostics_hz=0.0)
    commands = d.client.collect(JointTrajectory, ARM_TOPIC)
    joints = d.client.collect(JointState, "/joint_states")
    d.up()
    assert d.client.state("vla_deploy") == "active"
    assert d.client.call(Trigger, "/vla_deploy/start_episode").success
    wait_for(lambda: len(commands) > 5, 20, "policy commands")
    assert not d.client.call(Trigger, "/vla_deploy/start_episode").success  # one episode at a time
    assert d.client.transition("vla_deploy", DEACTIVATE)
    assert d.client.state("vla_deploy") == "inactive"
    # the last command holds the arm where it was measured: a position /joint_states reported (the arm was
    # moving then, so it settles back there within a second)
    time.sleep(0.3)
    held = np.asarray(commands[-1][1].points[0].positions)
    reported = np.array([m.position[:7] for _, m in joints[-40:]])
    assert np.abs(reported - held).max(axis=1).min() < 1e-9, held
    time.sleep(1.0)
    measured = np.asarray(joints[-1][1].position[:7])
    assert np.allclose(held, measured, atol=0.02), (held, measured)
    n = len(commands)
    time.sleep(0.5)
    assert len(commands) == n  # inactive: nothing more is commanded
    assert not d.client.call(Trigger, "/vla_deploy/start_episode").success
    assert d.client.transition("vla_deploy", CLEANUP)
    assert d.client.state("vla_deploy") == "unconfigured"
    assert d.client.transition("vla_deploy", CONFIGURE)  # and again
    assert d.client.transition("vla_deploy", ACTIVATE)
    assert d.client.state("vla_deploy") == "active"
    assert d.client.call(Trigger, "/vla_deploy/start_episode").success
    n = len(commands)
    wait_for(lambda: len(commands) > n + 5, 20, "policy commands")
    check_signal_holds_and_exits(d, signal.SIGTERM, commands, joints)


def test_intervention_is_recorded_and_drives_the_arm(deployment, tmp_path):
    d = deployment(record_dir=str(tmp_path / "rec"), instruction=INSTRUCTION, max_steps=0, success_topic="")
    engage = d.client.publisher(Bool, "/vla_deploy/intervention")
    teleop = d.client.publisher(JointState, "/vla_deploy/teleop_command")
    joints = d.client.collect(JointState, "/joint_states")
    d.up()
    assert d.client.call(Trigger, "/vla_deploy/start_episode").success
    wait_for(lambda: len(joints) > 10, 20, "joint states")
    time.sleep(1.0)  # the policy drives for a second
    start = np.asarray(joints[-1][1].position[:7])
    target = start.copy()
    target[0] += 0.15  # the operator turns the base joint
    engage.publish(Bool(data=True))
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:  # a leader arm streams its position
        teleop.publish(JointState(name=JOINTS, position=[float(v) for v in target]))
        time.sleep(0.05)
    reached = np.asarray(joints[-1][1].position[:7])
    assert abs(reached[0] - target[0]) < 0.03, (reached, target)
    engage.publish(Bool(data=False))
    time.sleep(0.5)
    res = d.client.call(Trigger, "/vla_deploy/mark_failure")
    assert res.success and "ended" in res.message

    frames = _frames(tmp_path / "rec")
    flags = frames["complementary_info.is_intervention"].astype(bool).ravel()
    assert 10 <= flags.sum() < len(flags), flags  # ~3 s of operator control inside a longer episode
    actions = frames["action"][flags]
    assert np.allclose(actions[-1][:7], target, atol=1e-4)  # the operator's command was recorded
    proposals = frames["complementary_info.policy_action"][flags]
    assert not np.allclose(proposals[-1][:7], target, atol=1e-3)  # beside the policy's own proposal


def _frames(root: Path) -> dict[str, np.ndarray]:
    import pyarrow.parquet as pq

    from vla.data.validate import validate_dataset

    assert validate_dataset(root).num_episodes == 1
    table = pq.read_table(sorted((root / "data").rglob("*.parquet"))[0]).to_pydict()
    return {k: np.asarray(v) for k, v in table.items() if not k.startswith("observation.images")}


def test_sigkill_loses_no_completed_episode(deployment, tmp_path, reach_checkpoint):
    """Two episodes are stopped and written; the third is killed mid-run. The episodes are long (300 steps)
    and each is ended by ``stop_episode`` once it is seen running, so no timing decides which is which."""
    from vla.data.validate import validate_dataset
    from vla.data.writer import EpisodeWriter, load_spec

    rec = tmp_path / "rec"
    d = deployment(
        record_dir=str(rec), instruction=INSTRUCTION, max_steps=300, success_topic="", diagnostics_hz=10.0
    )
    d.up()
    for _ in range(2):
        number = d.start_episode()
        d.wait_running(number, steps=3)
        res = d.client.call(Trigger, "/vla_deploy/stop_episode")
        assert res.success and "ended" in res.message, res.message
    number = d.start_episode()
    d.wait_running(number, steps=3)
    d.node.kill()  # SIGKILL mid-episode
    with EpisodeWriter(rec, load_spec(rec), resume=True) as w:  # what the node does at its next start
        assert w.num_episodes == 2, w.recovery_report
    assert validate_dataset(rec).num_episodes == 2


class FakeArm:
    """The test process as the robot: joint states and camera frames at 10 Hz, stamped when sent."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.joints_pub = client.publisher(JointState, "/joint_states")
        from sensor_msgs.msg import Image

        self.image_pubs = {
            c: client.publisher(Image, f"/cameras/{c}/image_raw", sensor=True) for c in ("agentview", "wrist")
        }
        self.send_joints = self.send_images = True
        self.q = np.array([0.0, 0.1, 0.0, -2.2, 0.0, 2.3, 0.785])
        self.last_joint_stamp = 0.0
        self.timer = client.node.create_timer(0.1, self.tick)

    def tick(self) -> None:
        from vla_ros.conversions import array_to_image, stamp

        t = self.client.now()
        if self.send_joints:
            msg = JointState(name=[*JOINTS, "panda_finger_joint1"], position=[*map(float, self.q), 0.04])
            msg.header.stamp = stamp(t)
            self.joints_pub.publish(msg)
            self.last_joint_stamp = t
        if self.send_images:
            for c, pub in self.image_pubs.items():
                pub.publish(array_to_image(np.full((32, 32, 3), 90, np.uint8), t, c))
            self.last_image_stamp = t


@pytest.mark.parametrize("silent", ["joints", "camera"])
def test_stale_input_holds_within_one_control_period(deployment, silent):
    """The arm's joint states (or a camera) stop: the node holds within one control period of the input
    going stale (its age passing the watchdog's 0.25 s), and reports why on /diagnostics."""
    d = deployment(sim=False, instruction=INSTRUCTION, max_steps=0)  # the test is the robot
    arm = FakeArm(d.client)
    commands = d.client.collect(JointTrajectory, ARM_TOPIC)
    d.up()
    assert d.client.call(Trigger, "/vla_deploy/start_episode").success
    wait_for(lambda: len(commands) > 10, 20, "policy commands")
    if silent == "joints":
        arm.send_joints = False
        stale_at = arm.last_joint_stamp + 0.25
    else:
        arm.send_images = False
        stale_at = arm.last_image_stamp + 0.25
    fault = wait_for(lambda: d.last().get("fault"), 5, "a fault on /diagnostics")
    assert fault.startswith("stale observation"), fault
    assert ("joints" in fault) == (silent == "joints")
    # the first hold: commands from then on all equal the measured position
    t_hold = _first_hold_time(commands, arm.q)
    wall_offset = time.time() - time.monotonic()
    assert t_hold + wall_offset - stale_at <= 0.1 + 0.03, t_hold + wall_offset - stale_at
    assert np.allclose(commands[-1][1].points[0].positions, arm.q, atol=1e-6)


def _first_hold_time(commands, q) -> float:
    for t, msg in commands:
        if np.allclose(msg.points[0].positions, q, atol=1e-9):
            return t
    raise AssertionError("no hold command")


def test_commands_and_gripper_topics(deployment):
    """The gripper gets its own controller topic (forward position), in the profile's units."""
    d = deployment(max_steps=60)
    grip = d.client.collect(Float64MultiArray, "/gripper_position_controller/commands")
    d.up()
    d.episode()
    assert grip and all(len(m.data) == 1 and 0.0 <= m.data[0] <= 0.04 for _, m in grip)


def test_the_node_infers_through_a_policy_server(deployment, reach_checkpoint):
    """``deploy_overrides:=["remote=<host:port>"]`` and no checkpoint: the policy runs in ``vla-serve`` (its
    own process), the node fetches the checkpoint's settings from it, and the arm reaches the ball."""
    import subprocess
    import sys

    serve = Path(sys.executable).parent / "vla-serve"
    proc = subprocess.Popen(
        [str(serve), f"checkpoint={reach_checkpoint}", "port=0"], stdout=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline()  # "serving <dir> on 127.0.0.1:<port> (token off)"
        assert line.startswith("serving "), line
        address = line.split(" on ")[1].split()[0]
        d = deployment(
            checkpoint="", instruction=INSTRUCTION, max_steps=60, deploy_overrides=[f"remote={address}"]
        )
        d.up()
        state = d.episode()
        assert state["last_success"] == "true", (state, d.node.log()[-2000:])
        assert float(state["inference_latency_ms"]) > 0
        assert f"served at {address}" in d.node.log()
    finally:
        proc.terminate()
        proc.wait(10)
