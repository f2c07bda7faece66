"""``vla_deploy``: a trained checkpoint deployed on an arm behind ros2_control, as a lifecycle node.

The node is a thin translator. A :class:`~vla_ros.topic_robot.TopicRobot` turns topics into the runtime's
``Robot`` (``observe`` = the latest joint states and frames with their header stamps, ``command`` =
publish to the controllers), and the episode runs in :func:`vla.runtime.loop.run_episode`, the same loop
that runs the simulator: policy, safety, upcycling, RTC and self-compensation live there, not here.

Lifecycle (``rclpy.lifecycle``):

- ``configure``: load the checkpoint and the arm profile, build the deployment stack, create publishers,
  subscriptions and services (a bad checkpoint, or ``record_dir`` without an instruction, from the
  parameter or the checkpoint's ``deploy.yaml``: one error line, the node stays unconfigured);
- ``activate``: episodes may run (``~/start_episode``; ``start_on_activate`` starts one), diagnostics on;
- ``deactivate``: the running episode ends and the arm holds its measured position;
- ``cleanup`` / ``shutdown``: release everything (the arm is held first); an error in any transition holds
  the arm and returns the node to unconfigured; a transition the current state does not offer is refused
  (success=false, one log line) and the node stays where it is.

An episode that raises is reported on ``/diagnostics`` (state ``failed``, ``last_error``). SIGINT and SIGTERM
end the episode, hold the arm and end the process within 1 s, whatever arrives (see :func:`main`).

The control loop runs in its own thread, paced to the control rate by ``run_episode`` (coarse sleep, then
a short spin to the deadline). Every callback (inputs, services, lifecycle, timers) runs in one
``SingleThreadedExecutor``; the input callbacks only update caches. Not rclpy's ``MultiThreadedExecutor``:
measured here, it delivered 10 Hz joint states and frames up to 0.9 s late now and then (p99 0.5 s, the
single-threaded one 2-6 ms at most, ros2/rclpy#1452), enough to trip the stale-input watchdog. The
callbacks that block (``configure`` loads the policy; a stop waits until the episode is written) run only
when no episode needs fresh inputs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import replace
from typing import Any

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from lifecycle_msgs.srv import ChangeState
from rclpy.client import Client
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.publisher import Publisher
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.service import Service
from rclpy.signals import SignalHandlerOptions
from rclpy.subscription import Subscription
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from vla_ros.conversions import position_command, trajectory_command
from vla_ros.params import (
    ARM_DESCRIPTIONS,
    DEPLOY_DESCRIPTIONS,
    ArmParams,
    DeployParams,
    declare,
    read,
)
from vla_ros.topic_robot import InputsNotReady, TopicRobot, TopicTeleop

RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


class Diagnostics:
    """A ``run_episode`` subscriber that keeps the loop's state for the node's ``/diagnostics``: period and
    work time, inference latency, upcycled horizon, compensation, intervention and the safety state. Each
    period only keeps the step (no formatting in the control loop); :attr:`state` formats it when the node
    publishes, at the diagnostics rate, and at once when a fault appears."""

    def __init__(self, node: DeployNode) -> None:
        self.node = node
        self.phase = "idle"  # idle, running, ending (written, the arm about to hold), failed
        self._episode = ""
        self._last: tuple[Any, float | None] | None = None  # (the last StepRecord, its period)
        self._ended: dict[str, str] = {}
        self._last_wall: float | None = None
        self._holding = False

    def on_start(self, robot, obs) -> None:
        self._last_wall, self._holding, self._last = None, False, None
        self.phase, self._episode = "running", str(self.node.episodes)

    def on_step(self, step) -> None:
        period = None if self._last_wall is None else step.wall_time - self._last_wall
        self._last_wall = step.wall_time
        self._last = (step, period)
        if step.out.holding and not self._holding:
            self.node.publish_diagnostics()  # a fault is reported in the period it appears
        self._holding = step.out.holding

    def on_end(self, result) -> None:
        self.phase = "ending"  # "idle" once the episode is written and the arm holds (DeployNode)
        self._ended = {"last_success": str(result.success).lower(), "last_steps": str(result.steps)}

    def idle(self, error: str = "") -> None:
        """The episode is over and the arm holds: ``idle``, or ``failed`` with ``last_error`` when it raised
        (until the next episode starts)."""
        self.phase = "failed" if error else "idle"
        if error:
            last = self._last if self._episode == str(self.node.episodes) else None  # None: never started
            steps = 0 if last is None else last[0].index + 1
            self._episode = str(self.node.episodes)
            self._ended = {"last_success": "false", "last_steps": str(steps), "last_error": error}
        else:
            self._ended["last_error"] = ""

    @property
    def state(self) -> dict[str, str]:
        out = {"state": self.phase, "episode": self._episode}
        last, d = self._last, self.node.deployment
        if last is not None and d is not None:
            step, period = last
            stack = d.stack
            latency = d.runner.last_latency_s
            comp = stack.compensator
            fault = stack.fault
            horizons = stack.executor.horizons
            if self.phase == "running" and step.out.holding:
                out["state"] = "holding"
            out.update(
                {
                    "step": str(step.index),
                    "period_ms": "" if period is None else f"{1000 * period:.2f}",
                    "work_ms": f"{1000 * step.work_s:.2f}",
                    "inference_latency_ms": "" if latency is None else f"{1000 * latency:.1f}",
                    "horizon": str(horizons[-1] if horizons else stack.executor.horizon),  # upcycled, else h
                    "upcycling": "on" if stack.executor.upcycle is not None else "off",
                    "compensation": "off"
                    if comp is None
                    else f"on (fits {comp.fits}, samples {comp.samples})",
                    "intervention": str(bool(step.out.is_intervention)).lower(),
                    "safety": "ok" if fault is None else "fault",
                    "fault": fault or "",
                }
            )
        return {**out, **self._ended}


class StepTopics:
    """A ``run_episode`` subscriber that publishes, in each period right after the command, the policy's
    proposal (``~/policy_action``, empty while the arm holds) and whether the operator was in control
    (``~/is_intervention``): with the joint states, frames and commands, what a rosbag2 recording needs to
    become a dataset episode (``vla-bag2dataset`` pairs them with the command by receive time, so they go
    out with the command, not a period later with ``on_step``)."""

    def __init__(self, proposal_pub: Any, flag_pub: Any) -> None:
        self.proposal_pub, self.flag_pub = proposal_pub, flag_pub

    def on_start(self, robot, obs) -> None:
        pass

    def on_command(self, index, obs, out) -> None:
        p = out.policy_action
        self.proposal_pub.publish(Float64MultiArray(data=[] if p is None else [float(v) for v in p]))
        self.flag_pub.publish(Bool(data=bool(out.is_intervention)))

    def on_step(self, step) -> None:
        pass

    def on_end(self, result) -> None:
        pass


class DeployNode(LifecycleNode):
    """See the module docstring."""

    def __init__(self, name: str = "vla_deploy") -> None:
        super().__init__(name)
        declare(self, ArmParams, ARM_DESCRIPTIONS)
        declare(self, DeployParams, DEPLOY_DESCRIPTIONS)
        self.deployment: Any = None
        self.served = ""  # the checkpoint (and the vla-serve running it) this node deploys
        self.robot: TopicRobot | None = None
        self.teleop: TopicTeleop | None = None
        self.writer: Any = None
        self.recorder: Any = None
        self.diagnostics = Diagnostics(self)
        self.episodes = 0
        self.last_result: Any = None
        self._entities: list[Any] = []
        self._thread: threading.Thread | None = None
        self._active = False
        self._diag_timer: Any = None
        self._diag_pub: Any = None
        self._rclpy_change_state = self._service_change_state.callback
        self._service_change_state.callback = self._change_state

    # ---- lifecycle ---------------------------------------------------------------------------------------
    def _change_state(self, request: ChangeState.Request, response: ChangeState.Response) -> Any:
        """``~/change_state``: a transition the current state does not offer (``activate`` when unconfigured,
        as ``ros2 lifecycle set`` sends it) is refused with success=false and one log line; rclpy's own
        handler raises ``RCLError`` out of the executor for it, which ends the node."""
        t = request.transition
        _, state = self._state_machine.current_state
        offered = [(tid, label) for tid, label, *_ in self._state_machine.available_transitions]
        if not any(label == t.label if t.label else tid == t.id for tid, label in offered):
            names = ", ".join(label for _, label in offered)
            self.get_logger().error(
                f"change_state: transition {t.label or t.id} is not available in state {state} (available: "
                f"{names}); staying {state}"
            )
            response.success = False
            return response
        return self._rclpy_change_state(request, response)

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self._configure()
        except Exception as exc:  # a bad checkpoint, profile or parameter: stay unconfigured, say why
            self.get_logger().error(f"configure failed: {exc}")
            self._release()
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = True
        hz = self.opts.diagnostics_hz
        if hz > 0:
            self._diag_timer = self.create_timer(1.0 / hz, self.publish_diagnostics)
        if self.opts.start_on_activate:
            self._start_episode()
        self.get_logger().info("active: ~/start_episode runs an episode")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._end_episode(None)
        self._active = False
        self._hold()
        if self._diag_timer is not None:
            self.destroy_timer(self._diag_timer)
            self._diag_timer = None
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._hold()
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._end_episode(None)
        self._active = False
        self._hold()
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.get_logger().error(f"error in transition from {state.label}: holding the arm, releasing")
        self._active = False
        if self.robot is not None:
            self.robot.mark(None)
        self._hold()
        self._release()
        return TransitionCallbackReturn.SUCCESS  # -> unconfigured

    # ---- configure / release -----------------------------------------------------------------------------
    def _configure(self) -> None:
        import torch

        from vla.checkpoint import read_config
        from vla.checks import check_checkpoint
        from vla.runtime.defaults import DeployDefaults
        from vla.runtime.deployment import deploy_checkpoint
        from vla.runtime.remote import served_checkpoint

        self.arm: ArmParams = read(self, ArmParams)
        self.opts: DeployParams = read(self, DeployParams)
        o, arm = self.opts, self.arm
        arm.check()
        cfg = deploy_config(o.deploy_overrides)
        torch.set_num_threads(max(1, o.torch_threads))
        if cfg.remote:  # the policy runs in a vla-serve; its settings come from there (or the local copy)
            checkpoint, info = served_checkpoint(
                cfg.remote, o.checkpoint or None, timeout_s=cfg.remote_timeout_s
            )
            self.served = f"{info['checkpoint']} served at {cfg.remote}"
        elif not o.checkpoint:
            raise ValueError("parameter checkpoint is empty: pass checkpoint:=<folder>")
        else:
            checkpoint = self.served = o.checkpoint
            check_checkpoint(checkpoint, imports=o.imports)
        trained = DeployDefaults.load(checkpoint)  # its training data's most frequent instruction
        instruction = o.instruction or (trained and trained.instruction) or ""
        if o.record_dir and not instruction:  # every recorded frame needs its task
            raise ValueError(
                f"record_dir={o.record_dir} needs an instruction: pass instruction:=<the task> (the "
                "checkpoint's deploy.yaml names no training instruction)"
            )
        profile = replace(arm.profile(), control_hz=arm.rate)
        size = read_config(checkpoint).get("image_size") or (
            profile.cameras[0].height,
            profile.cameras[0].width,
        )
        image_size = (int(size[0]), int(size[1]))  # what the policy reads; other frames are resized
        self.deployment = deploy_checkpoint(
            checkpoint,
            profile,
            cfg,
            available_cameras=profile.camera_names,
            device=o.device,
            cond=None if o.cond < 0 else o.cond,
            guidance=None if o.guidance < 0 else o.guidance,
            num_steps=o.num_steps or None,
            imports=o.imports,
        )
        home = np.r_[profile.home or np.zeros(profile.arm_dim), [] if profile.gripper is None else [0.0]]
        warm = self.deployment.warm_up(home, image_size)
        self.get_logger().info(
            f"policy loaded and warmed up (first inference {warm:.2f} s); "
            f"deploy: {self.deployment.settings.describe()}"
        )
        topics = dict(zip(profile.camera_names, arm.camera_topics, strict=True))
        cameras = {c: topics[c] for c in self.deployment.cameras}
        clock = self._now
        arm_pub = self._publisher(arm.command_interface, arm.command_topic())
        grip_pub = None
        if profile.gripper is not None:
            grip_pub = self._publisher(arm.gripper_interface, arm.command_topic(gripper=True))
        self.robot = TopicRobot(
            profile,
            joint_names=arm.joint_names,
            gripper_joint=arm.gripper_joint,
            cameras=cameras,
            image_size=image_size,
            clock=clock,
            publish_arm=self._sender(arm_pub, arm.command_interface, arm.joint_names, profile.dt),
            publish_gripper=None
            if grip_pub is None
            else self._sender(grip_pub, arm.gripper_interface, [arm.gripper_joint], profile.dt),
            reset_hook=self._reset_hook(o.reset_service) if o.reset_service else None,
            inputs_timeout_s=o.inputs_timeout_s,
        )
        self.robot.instruction = instruction
        self.teleop = TopicTeleop(arm.joint_names, arm.gripper_joint, clock, cfg.safety.stale_after_s)
        self._subscribe(cameras)
        self._diag_pub = self._track(self.create_publisher(DiagnosticArray, "/diagnostics", RELIABLE))
        self.step_topics = StepTopics(
            self._track(self.create_publisher(Float64MultiArray, "~/policy_action", RELIABLE)),
            self._track(self.create_publisher(Bool, "~/is_intervention", RELIABLE)),
        )
        for name, handler in (
            ("~/start_episode", lambda req, res: self._service(res, self._start_episode)),
            ("~/stop_episode", lambda req, res: self._service(res, lambda: self._end_episode(None))),
            ("~/mark_success", lambda req, res: self._service(res, lambda: self._end_episode(True))),
            ("~/mark_failure", lambda req, res: self._service(res, lambda: self._end_episode(False))),
        ):
            self._track(self.create_service(Trigger, name, handler))
        if o.record_dir:
            self._open_recording(o.record_dir, profile, image_size)
        self.get_logger().info(
            f"configured: {self.served} on {profile.name} at {profile.control_hz:g} Hz, cameras "
            f"{cameras}, safety {cfg.safety.mode}, recording {o.record_dir or 'off'}, instruction "
            f"{instruction!r} ({'parameter' if o.instruction else 'checkpoint' if instruction else 'none'})"
        )

    def _open_recording(self, root: str, profile, image_size) -> None:
        from vla.data.schema import EpisodeSpec
        from vla.data.writer import EpisodeWriter
        from vla.runtime.subscribers import FrameRecorder

        cams = self.deployment.cameras
        h, w = image_size
        spec = EpisodeSpec(
            cameras={c: (h, w) for c in cams},
            state_dim=profile.action_dim,
            action_dim=profile.action_dim,
            fps=max(1, round(profile.control_hz)),
            robot_type=profile.name,
            state_names=list(profile.action_names),
            action_names=list(profile.action_names),
        )
        self.writer = EpisodeWriter(root, spec, resume=True)
        for line in self.writer.recovery_report:
            self.get_logger().warning(f"recording {root}: {line}")
        self.recorder = FrameRecorder(cams, self.writer, source="policy")
        self.get_logger().info(f"recording to {root} ({self.writer.num_episodes} episodes there)")

    def _release(self) -> None:
        destroyers = (
            (Publisher, self.destroy_publisher),
            (Subscription, self.destroy_subscription),
            (Service, self.destroy_service),
            (Client, self.destroy_client),
        )
        for entity in reversed(self._entities):
            for kind, destroy in destroyers:
                if isinstance(entity, kind):
                    with contextlib.suppress(Exception):  # release what can be released
                        destroy(entity)
        self._entities = []
        if self.writer is not None:
            self.writer.close()
        if self.deployment is not None:
            self.deployment.stack.close()
            if hasattr(self.deployment.runner, "close"):  # a vla-serve client's channel
                self.deployment.runner.close()
        self.deployment = self.robot = self.teleop = self.writer = self.recorder = None
        self._diag_pub = None

    def _track(self, entity: Any) -> Any:
        self._entities.append(entity)
        return entity

    def _publisher(self, interface: str, topic: str) -> Any:
        kind = JointTrajectory if interface == "joint_trajectory" else Float64MultiArray
        return self._track(self.create_publisher(kind, topic, RELIABLE))

    @staticmethod
    def _sender(pub: Any, interface: str, names: list[str] | tuple[str, ...], dt: float):
        if interface == "joint_trajectory":
            return lambda q: pub.publish(trajectory_command(names, q, dt))
        return lambda q: pub.publish(position_command(q))

    def _subscribe(self, cameras: dict[str, str]) -> None:
        assert self.robot is not None and self.teleop is not None
        robot, teleop = self.robot, self.teleop
        sub = self.create_subscription
        self._track(sub(JointState, self.arm.joint_states_topic, robot.on_joint_state, RELIABLE))
        for cam, topic in cameras.items():
            kind = CompressedImage if topic.rstrip("/").endswith("/compressed") else Image
            self._track(
                sub(
                    kind,
                    topic,
                    lambda m, c=cam: robot.on_image(c, m),
                    qos_profile_sensor_data,
                )
            )
        self._track(sub(String, "~/instruction", self._on_instruction, RELIABLE))
        self._track(sub(Bool, "~/intervention", lambda m: teleop.on_intervention(m.data), RELIABLE))
        self._track(sub(JointState, "~/teleop_command", teleop.on_command, RELIABLE))
        if self.opts.success_topic:
            self._track(sub(Bool, self.opts.success_topic, self._on_success, RELIABLE))

    def _reset_hook(self, service: str):
        client = self._track(self.create_client(Trigger, service))

        def reset() -> None:
            if not client.wait_for_service(timeout_sec=self.opts.inputs_timeout_s):
                raise InputsNotReady(f"reset_service {service} is not available")
            future = client.call_async(Trigger.Request())
            done = threading.Event()
            future.add_done_callback(lambda _: done.set())
            deadline = time.monotonic() + self.opts.inputs_timeout_s
            while not done.wait(0.05):  # the response comes through the executor; a stop ends the wait
                if time.monotonic() > deadline or (self.robot is not None and self.robot.stopping):
                    raise InputsNotReady(f"reset_service {service} did not answer")
            if not future.result().success:
                raise InputsNotReady(f"reset_service {service} failed: {future.result().message}")

        return reset

    # ---- episodes ------------------------------------------------------------------------------------------
    def _on_instruction(self, msg: String) -> None:
        if self.robot is None:
            return
        if not msg.data and self.writer is not None:
            self.get_logger().warning("~/instruction: an empty one is ignored while recording")
            return
        self.robot.on_instruction(msg.data)

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_success(self, msg: Bool) -> None:
        # a detector's verdict counts once the episode has run a period (not one from before its start)
        if msg.data and self.robot is not None and self.running and self.robot.periods > 0:
            self.robot.mark(True)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _start_episode(self) -> str:
        if not self._active or self.robot is None:
            raise RuntimeError("the node is not active")
        if self.running:
            raise RuntimeError("an episode is running")
        self.episodes += 1
        self._thread = threading.Thread(target=self._episode, name="vla-control-loop", daemon=True)
        self._thread.start()
        return f"episode {self.episodes} started"

    def _episode(self) -> None:
        from vla.runtime.loop import run_episode

        assert self.robot is not None and self.deployment is not None
        subscribers: list[Any] = [self.diagnostics, self.step_topics]
        if self.recorder is not None:
            self.recorder.extra = {"robot": self.robot.profile.name, "checkpoint": self.served}
            subscribers.append(self.recorder)
        error = ""
        try:
            result = run_episode(
                self.robot,
                self.deployment.stack,
                max_steps=self.opts.max_steps or None,
                teleop=self.teleop,
                subscribers=subscribers,
                stop=lambda: self.robot is not None and self.robot.stopping,
            )
            self.last_result = result
            self.get_logger().info(
                f"episode {self.episodes}: {result.steps} steps, success {result.success}, takeovers "
                f"{result.takeovers}, fault {result.fault}"
                + (
                    f", recorded ({self.writer.num_episodes} in {self.opts.record_dir})"
                    if self.writer
                    else ""
                )
            )
        except InputsNotReady as exc:
            error = f"not started: {exc}"
            self.get_logger().error(f"episode {self.episodes} {error}")
            self.last_result = None
        except Exception as exc:  # any failure is reported on /diagnostics (state failed, last_error)
            error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            self.get_logger().error(f"episode {self.episodes} failed: {exc}\n{traceback.format_exc()}")
            self.last_result = None
            if self.writer is not None:
                self.writer.discard_episode()
        finally:
            self._hold()  # between episodes the arm holds where it is
            self.diagnostics.idle(error)
            self.publish_diagnostics()

    def _end_episode(self, success: bool | None) -> str:
        """End the running episode (a mark, or a stop without one); returns when it is written."""
        if not self.running or self.robot is None:
            return "no episode running"
        self.robot.mark(success)
        assert self._thread is not None
        self._thread.join(timeout=60.0)
        r = self.last_result
        return "episode ended" if r is None else f"episode ended: {r.steps} steps, success {r.success}"

    def _hold(self) -> None:
        if self.robot is not None:
            try:
                self.robot.hold()
            except Exception as exc:
                self.get_logger().error(f"hold failed: {exc}")

    def wait_delivered(self, timeout_s: float) -> None:
        """Wait, ``timeout_s`` at most, until every subscriber acknowledged what the node published."""
        from rclpy.duration import Duration

        deadline = time.monotonic() + timeout_s
        for pub in [e for e in self._entities if isinstance(e, Publisher)]:
            pub.wait_for_all_acked(Duration(seconds=max(0.0, deadline - time.monotonic())))

    def _service(self, response: Trigger.Response, action) -> Trigger.Response:
        try:
            response.message = action()
            response.success = True
        except Exception as exc:
            response.success, response.message = False, str(exc)
        return response

    def publish_diagnostics(self) -> None:
        if self._diag_pub is None:
            return
        s = dict(self.diagnostics.state)
        fault, error = s.get("fault", ""), s.get("last_error", "") if s["state"] == "failed" else ""
        level = DiagnosticStatus.ERROR if fault or error else DiagnosticStatus.OK
        message = f"holding: {fault}" if fault else f"failed: {error}" if error else s["state"]
        status = DiagnosticStatus(
            level=level,
            name=f"{self.get_name()}: control loop",
            message=message,
            hardware_id=self.arm.robot,
            values=[KeyValue(key=k, value=v) for k, v in s.items()],
        )
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(msg)


def deploy_config(overrides: tuple[str, ...] | list[str]):
    """A :class:`~vla.runtime.config.DeployConfig` from dotted ``key=value`` overrides (the node's
    ``deploy_overrides``), with the safety layer on (``safety.mode=hold``) unless overridden."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from vla.runtime.config import RENAMED, DeployConfig
    from vla.runtime.safety import SafetyConfig

    base = OmegaConf.structured(DeployConfig(safety=SafetyConfig(mode="hold")))
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ValueError(f"deploy_overrides: {bad} are not key=value")
    old = [k for k in (o.split("=", 1)[0] for o in overrides) if k in RENAMED]
    if old:
        raise ValueError(f"deploy_overrides: {old[0]}= is now {RENAMED[old[0]]}= (e.g. {RENAMED[old[0]]}=3)")
    try:
        merged = OmegaConf.merge(base, OmegaConf.from_dotlist(list(overrides)))
        return OmegaConf.to_object(merged)
    except (OmegaConfBaseException, ValueError) as exc:
        raise ValueError(f"deploy_overrides {list(overrides)}: {exc}".splitlines()[0]) from exc


def main(args: list[str] | None = None) -> None:
    # our own SIGINT/SIGTERM handling: rclpy's would invalidate the context before the arm is held. The
    # handler only sets a flag (a callback in progress, e.g. configure loading the policy, completes); the
    # executor waits at most 0.1 s at a time, so the flag is seen whatever the traffic (a plain spin() sits
    # in its wait until a message or timer wakes it, and the handler runs only then)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stop.set())
    node = DeployNode()
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
    except rclpy.executors.ExternalShutdownException:
        pass
    finally:
        node.get_logger().info("stopping: ending the episode, holding the arm")
        node._end_episode(None)
        node._hold()
        node.wait_delivered(0.3)  # the hold reaches the controllers before the process ends
        node._release()
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    # all is released and the logs flushed: skip the interpreter's teardown of torch (0.5-1 s on our test
    # machine), so that the node is gone within 1 s of the signal
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
