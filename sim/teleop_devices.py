"""A person at a desk taking over a sim rollout with LeRobot's own teleop devices.

- :class:`PandaEEMap`: the sim Panda's :class:`~hardware.lerobot_teleop.EEToJoints` for end-effector devices
  (gamepad, ``keyboard_ee``): the tool target moves by the scaled delta each period and the scripted expert's
  IK (:class:`~sim.experts.ik.ArmIK`, grip pointing down) turns it into joint targets.
- :func:`make_device_teleoperator`: builds LeRobot's ``gamepad`` / ``keyboard_ee`` / ``so101_leader`` from its
  LeRobot config class, connects it and wraps it in :class:`~hardware.lerobot_teleop.LeRobotTeleop`. It needs
  the device attached (and, for the keyboard, an X11 display); without one it raises saying what is missing.

Pass the result as ``teleop=`` of :func:`vla.runtime.loop.run_episode` (the sim rollout's operator).
"""

from __future__ import annotations

import importlib
from dataclasses import fields
from typing import Any, Literal

import numpy as np
from lerobot.teleoperators.utils import make_teleoperator_from_config

from hardware.lerobot_teleop import GripperCommand, LeRobotTeleop, LeRobotTeleopConfig
from hardware.profiles import PROFILES
from sim.experts.ik import ArmIK
from vla.robot import Observation, Robot, RobotProfile

# name -> (module, LeRobot config class, command kind, what to check when it does not connect)
DEVICES = {
    "gamepad": (
        "lerobot.teleoperators.gamepad.configuration_gamepad",
        "GamepadTeleopConfig",
        "ee_delta",
        "plug in a gamepad (pygame sees none) or pass hidapi_fallback=True",
    ),
    "keyboard_ee": (
        "lerobot.teleoperators.keyboard.configuration_keyboard",
        "KeyboardEndEffectorTeleopConfig",
        "ee_delta",
        "pynput captures keys only in an X11 session: set DISPLAY (not Wayland, not headless)",
    ),
    "so101_leader": (
        "lerobot.teleoperators.so_leader.config_so_leader",
        "SO101LeaderConfig",
        "joints",
        "connect the leader arm and pass port=... (find it with lerobot-find-port)",
    ),
}


class PandaEEMap:
    """End-effector deltas -> sim Panda joint targets; see the module docstring.

    The tool target is anchored at the measured tool position and yaw when a takeover starts (:meth:`reset`)
    and then moves by each period's delta, clipped to the profile's workspace box; it is not re-read from the
    measured pose every period, which would let the position-controlled arm sag and make the speed depend on
    its lag. ``gripper``: ``open`` / ``close`` command the profile's open / closed finger target, ``stay``
    keeps the last one (the measured opening at the takeover).
    """

    def __init__(self, profile: RobotProfile | None = None, ik: ArmIK | None = None) -> None:
        self.profile = profile or PROFILES.get("panda")
        if self.profile.arm_dim != 7 or self.profile.gripper is None:
            raise ValueError(
                f"PandaEEMap drives the sim Panda (7 joints and a gripper); profile {self.profile.name} has "
                f"{self.profile.arm_dim} joints"
            )
        self.ik = ik or ArmIK()
        self.q: np.ndarray | None = None  # [7] the last joint targets
        self.target: np.ndarray = np.zeros(3)  # m, the tool target
        self.yaw = 0.0
        self.gripper = self.profile.gripper.open

    def reset(self, obs: Observation) -> None:
        """Anchor at ``obs``: its joints, tool position, yaw and gripper opening."""
        self.q = np.asarray(obs.joints, dtype=np.float64).copy()
        self.target = np.asarray(self.ik.site_pos(self.q), dtype=np.float64).copy()
        self.yaw = self.ik.site_yaw(self.q)
        if obs.gripper is not None:
            self.gripper = float(obs.gripper)

    def __call__(self, obs: Observation, delta_xyz: np.ndarray, gripper: GripperCommand) -> np.ndarray:  # [8]
        if self.q is None:
            self.reset(obs)
        assert self.q is not None and self.profile.gripper is not None
        target = self.target + np.asarray(delta_xyz, dtype=np.float64)
        ws = self.profile.workspace
        self.target = target if ws is None else np.clip(target, ws.lower, ws.upper)
        self.q = self.ik.solve(self.q, self.target, self.yaw)
        if gripper != "stay":
            self.gripper = self.profile.gripper.open if gripper == "open" else self.profile.gripper.closed
        return np.r_[self.q, self.gripper]


def make_device_teleoperator(
    name: str,
    robot: Robot,
    *,
    delta_scale: float = 0.01,
    engage: Literal["auto", "events", "always"] = "auto",
    **options: Any,
) -> LeRobotTeleop:
    """LeRobot's teleoperator ``name`` built from its config class (``options``: that class's fields, e.g.
    ``port=`` for ``so101_leader``, ``use_gripper=`` for the gamepad), connected, and wrapped for ``robot``.

    ``gamepad`` / ``keyboard_ee`` drive the sim Panda through :class:`PandaEEMap` (``delta_scale`` m per unit
    per period); ``so101_leader`` drives an arm with the SO-101's joints (``robot.profile``: so101).
    """
    if name not in DEVICES:
        raise ValueError(f"teleop device {name!r}: use one of {sorted(DEVICES)}")
    module, cls_name, kind, hint = DEVICES[name]
    config_cls = getattr(importlib.import_module(module), cls_name)
    try:
        config = config_cls(**options)
    except TypeError as exc:
        known = sorted(f.name for f in fields(config_cls))
        raise ValueError(
            f"teleop device {name!r}: bad options {sorted(options)} ({exc}); fields: {known}"
        ) from exc
    try:
        device = make_teleoperator_from_config(config)
    except ImportError as exc:
        raise RuntimeError(f"teleop device {name!r} unavailable: {exc}") from exc
    ee_map = PandaEEMap(robot.profile) if kind == "ee_delta" else None
    cfg = LeRobotTeleopConfig(kind=kind, engage=engage, delta_scale=delta_scale)  # type: ignore[arg-type]
    teleop = LeRobotTeleop(device, robot.profile, cfg, ee_to_joints=ee_map)  # checks keys before connecting
    try:
        device.connect()
    except (ImportError, OSError, ConnectionError, RuntimeError) as exc:
        raise RuntimeError(f"teleop device {name!r} did not connect ({exc}): {hint}") from exc
    gamepad = getattr(device, "gamepad", None)
    if not device.is_connected or (gamepad is not None and not getattr(gamepad, "running", True)):
        if device.is_connected:
            device.disconnect()
        raise RuntimeError(f"teleop device {name!r} found no device: {hint}")
    return teleop


class _ViewerSync:
    """Subscriber: redraw MuJoCo's passive viewer after every period."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def on_start(self, robot: Robot, obs: Observation) -> None:
        self.handle.sync()

    def on_step(self, step: Any) -> None:
        self.handle.sync()

    def on_end(self, result: Any) -> None:
        pass


def open_viewer(robot: Any) -> _ViewerSync | None:
    """MuJoCo's interactive viewer on a :class:`~sim.robot.SimRobot`'s scene, so the person sees what they
    drive; None (and a note) without a display."""
    import os

    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        print("no display: the sim runs without a viewer (watch the recorded videos afterwards)")
        return None
    import mujoco.viewer

    env = robot.env
    return _ViewerSync(mujoco.viewer.launch_passive(env.model, env.data))
