"""docs/deploy.md's commands, taken from the markdown and run as written, so a doc change that breaks a
command breaks this test.

Every line of a ``bash`` block is either run here or listed in :data:`SKIPPED` with the reason; a new
command that is neither fails :func:`test_every_docs_command_is_run_or_skipped_by_design`. Placeholders
(``<ckpt>``, ``<bag folder>``, ...) are filled from :data:`fills`; an optional argument in brackets is
given (its first alternative).

There is no ``ros2`` CLI here (ros2cli is not on PyPI), so a ``ros2 service call <service> <type>`` line
runs as its equivalent: the same request from an rclpy client. The console-script commands and the
``vla-bag2dataset`` command run in a shell from the repository root, as the docs say.
"""

from __future__ import annotations

import importlib
import re
import shlex
import signal
import subprocess

import yaml
from ros_helpers import (
    ARM_CAMERA,
    ARM_TOPIC,
    CONFIGURE,
    PACKAGE,
    PANDA,
    BagRecorder,
    Client,
    Deployment,
    check_signal_holds_and_exits,
    wait_for,
)
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

ROOT = PACKAGE.parents[2]
DOC = ROOT / "docs" / "deploy.md"
SIM = "ros2_ws/install/vla_ros/lib/vla_ros/sim_robot "
DEPLOY = "ros2_ws/install/vla_ros/lib/vla_ros/vla_deploy "
SERVICE_CALL = "ros2 service call "
BAG2DATASET = "vla-bag2dataset "
RUN = (SIM, DEPLOY, SERVICE_CALL, BAG2DATASET)
SKIPPED = {
    "ros2 launch ": "the launch and launch_ros packages are not on PyPI, so the launch files cannot run here "
    "(test_translation checks the arguments they declare; test_launch_files_load runs where they exist)",
    "pip install ": "installs the project into the environment: make setup did it before these tests",
    "cd ros2_ws && colcon build": "builds the workspace: scripts/ros_test.sh did it before these tests",
}
FENCE = re.compile(r"^[ \t]*```(\w*)\n(.*?)^[ \t]*```", re.M | re.S)


def doc_commands() -> list[str]:
    """The commands of docs/deploy.md's ``bash`` blocks, continuation lines joined (other blocks are
    ``text``: figures)."""
    commands = []
    for block in FENCE.finditer(DOC.read_text()):
        lang, body = block.group(1), block.group(2)
        assert lang in ("bash", "text"), f"docs/deploy.md: a ```{lang} block; use bash (commands) or text"
        if lang == "bash":
            commands += [c.strip() for c in body.replace("\\\n", " ").splitlines() if c.strip()]
    return commands


def filled(command: str, fills: dict[str, str]) -> str:
    """``command`` with its placeholders filled and each optional ``[arg | alternative]`` given as ``arg``."""
    command = re.sub(r"(?<=\s)\[([^\]]*)\]", lambda m: m.group(1).split(" | ")[0], command)
    for placeholder, value in fills.items():
        command = command.replace(placeholder, shlex.quote(value))
    left = re.findall(r"<[^>]*>", command)
    assert not left, f"no value for {left} in: {command}"
    return command


def service_calls(commands: list[str]) -> list[str]:
    """The ``ros2 service call`` commands in the page's order, each once (comments dropped)."""
    calls = [shlex.join(shlex.split(c, comments=True)) for c in commands if c.startswith(SERVICE_CALL)]
    return list(dict.fromkeys(calls))


def ros2_service_call(client: Client, command: str):
    """``ros2 service call <service> <pkg/srv/Type> [<request as YAML>]`` from the rclpy client."""
    args = shlex.split(command, comments=True)
    assert args[:3] == ["ros2", "service", "call"] and len(args) in (5, 6), command
    package, _, name = args[4].split("/")
    srv = getattr(importlib.import_module(f"{package}.srv"), name)
    request = srv.Request()
    for key, value in (yaml.safe_load(args[5]) if len(args) == 6 else {}).items():
        setattr(request, key, value)
    return client.call(srv, args[3], request)


def test_every_docs_command_is_run_or_skipped_by_design():
    commands = doc_commands()
    unknown = [c for c in commands if not c.startswith(RUN + tuple(SKIPPED))]
    assert not unknown, f"docs/deploy.md commands neither run by test_docs.py nor in its SKIPPED: {unknown}"
    for kind in RUN:
        assert any(c.startswith(kind) for c in commands), f"docs/deploy.md has no {kind.strip()} command"


def test_docs_sim_commands_run_as_written(reach_checkpoint, tmp_path):
    """The sim commands as written (from the repository root), the lifecycle from a client, the service
    calls (a reach episode: started, then marked a success), a bag of it converted by the docs'
    vla-bag2dataset command; on the way, a transition the state does not offer leaves the node up, and at
    the end SIGINT with the sim already gone (Ctrl-C on ros2 launch) holds the arm and ends the node."""
    from vla.data.validate import validate_dataset

    commands = doc_commands()
    fills = {
        "<ckpt>": str(reach_checkpoint),
        "<bag folder>": str(tmp_path / "bag"),
        "<dataset>": str(tmp_path / "dataset"),
        "<params file>": str(PANDA),
    }
    sim = filled(next(c for c in commands if c.startswith(SIM)), fills)
    deploy = filled(next(c for c in commands if c.startswith(DEPLOY)), fills)
    d = Deployment(tmp_path, deploy, sim, cwd=ROOT)
    try:
        arm_commands = d.client.collect(JointTrajectory, ARM_TOPIC)
        joints = d.client.collect(JointState, "/joint_states")
        recorder = BagRecorder(d.client, {"mcap": tmp_path / "bag"})  # as `ros2 bag record` would
        d.up()
        assert not d.client.transition("vla_deploy", CONFIGURE)  # not offered when active
        assert d.client.state("vla_deploy") == "active"
        wait_for(lambda: {"/joint_states", ARM_CAMERA} <= recorder.topics(), 20, "joint states and frames")

        calls = service_calls(commands)
        number = ""
        for call in calls:
            res = ros2_service_call(d.client, call)
            assert res.success, (call, res.message)
            if "/start_episode " in call:
                number = res.message.split()[1]
                d.wait_running(number, steps=5)
        assert number, f"no start_episode among {calls}"
        d.client.call(Trigger, "/vla_deploy/stop_episode")  # in case the docs' calls leave it running
        state = d.wait_ended(number)
        assert state["state"] == "idle" and not state["last_error"], state
        assert int(state["last_steps"]) >= 5, state
        if any("/mark_success " in c for c in calls):
            assert state["last_success"] == "true", state

        recorder.close()
        bag2dataset = filled(next(c for c in commands if c.startswith(BAG2DATASET)), fills)
        res = subprocess.run(["bash", "-c", bag2dataset], cwd=ROOT, capture_output=True, text=True)
        assert res.returncode == 0, (bag2dataset, res.stderr[-2000:])
        assert "validated" in res.stdout
        assert validate_dataset(tmp_path / "dataset").num_episodes == 1

        check_signal_holds_and_exits(d, signal.SIGINT, arm_commands, joints)
        assert "stopping" in d.node.log()
    finally:
        d.close()
