"""A simulated teleoperator (HG-DAgger style): the scripted expert watches the policy and takes over.

Before the episode the expert is run "in its head" from the same initial state (a render-free copy of the
env), giving the reference path of the gripper -- its *tube*. During the episode the operator triggers when

- the gripper leaves the tube: ``min_k ||p_grip - path_k|| > tube`` (metres), or
- progress stalls: the arc length of the nearest path point has not grown by ``progress_eps`` for
  ``stall_steps`` steps (and the task is not solved yet),

then, after ``delay`` more steps (the human's reaction time, during which the policy keeps acting), takes
over for ``length`` steps with a freshly planned expert (from the task's ``takeover_phase``), and hands
back. Interventions are recorded as a human's would be (by :class:`vla.runtime.takeover.Takeover`): executed
action = the operator's, the policy's proposal kept alongside, ``is_intervention = True``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.env import EnvConfig, TabletopEnv
from sim.experts import ScriptedExpert


@dataclass
class TeleopConfig:
    """The simulated operator's triggers and takeover (every constant a field)."""

    enabled: bool = True
    tube: float = 0.08  # m: gripper farther than this from the expert's reference path triggers
    stall_steps: int = 15  # steps without progress along the path that trigger
    progress_eps: float = 0.01  # m of arc length that count as progress
    delay: int = 3  # reaction delay: steps between the trigger and the takeover
    length: int = 25  # takeover length in steps; the operator also hands back when its plan is done
    max_takeovers: int = 3  # per episode
    # who operates: "simulated" (the scripted expert above) or a person with one of LeRobot's devices,
    # "gamepad" / "keyboard_ee" / "so101_leader" (sim.teleop_devices; needs the device, runs in real time in
    # this process and opens MuJoCo's viewer when a display is there)
    device: str = "simulated"
    delta_scale: float = 0.01  # end-effector devices: metres per unit per control period
    port: str | None = None  # leader arms: the serial port

    def __post_init__(self) -> None:
        devices = ("simulated", "gamepad", "keyboard_ee", "so101_leader")
        if self.device not in devices:
            raise ValueError(f"teleop.device={self.device!r}: use one of {devices}")
        if self.tube <= 0 or self.progress_eps < 0:
            raise ValueError(f"tube={self.tube} must be > 0 and progress_eps={self.progress_eps} >= 0")
        if self.stall_steps < 1 or self.delay < 0 or self.length < 1 or self.max_takeovers < 0:
            raise ValueError(
                f"stall_steps={self.stall_steps} >= 1, delay={self.delay} >= 0, length={self.length} >= 1, "
                f"max_takeovers={self.max_takeovers} >= 0 required"
            )


def reference_path(env_cfg: EnvConfig, seed: int, state: np.ndarray) -> tuple[np.ndarray, bool]:
    """The expert's gripper path [T, 3] from physics ``state`` (no rendering), and whether it succeeds."""
    cfg = EnvConfig(**{**vars(env_cfg), "render": False, "terminate_on_success": False})
    env = TabletopEnv(cfg)
    try:
        env.reset(seed=seed, options={"state": state})
        expert = ScriptedExpert(env, seed=seed)
        expert.reset()
        path, success = [env.grip_pos()], False
        for _ in range(env.max_steps):
            _, _, _, truncated, info = env.step(expert.act())
            path.append(env.grip_pos())
            success = success or info["success"]
            if truncated or (expert.done and success):
                break
        return np.asarray(path), success
    finally:
        env.close()


class SimulatedTeleop:
    """The scripted expert as a :class:`~vla.robot.Teleoperator` of a :class:`~sim.robot.SimRobot`; see the
    module docstring. The takeover / hand-back bookkeeping (what is recorded, when the policy replans) is
    :class:`vla.runtime.takeover.Takeover`'s; this class only decides when the operator is in control and
    what it commands."""

    def __init__(self, env: TabletopEnv, cfg: TeleopConfig, seed: int = 0) -> None:
        self.env, self.cfg = env, cfg
        self.expert = ScriptedExpert(env, seed=seed)
        self.path = np.zeros((1, 3))
        self.arc = np.zeros(1)

    def reset(self, robot) -> None:
        """A new episode of ``robot`` (a :class:`~sim.robot.SimRobot` on this operator's env)."""
        self.reset_episode(robot.seed, robot.init_state)

    def reset_episode(self, seed: int | None, state: np.ndarray) -> None:
        self.path, self.expert_success = reference_path(self.env.cfg, seed, state)
        seg = np.linalg.norm(np.diff(self.path, axis=0), axis=1)
        self.arc = np.r_[0.0, np.cumsum(seg)]  # arc length at each path point
        self.takeovers = 0
        self.in_control = False
        self.countdown: int | None = None  # steps until a triggered takeover starts
        self.control_left = 0
        self.best_progress = 0.0
        self.since_progress = 0
        self.last_trigger = ""
        self.triggers: list[str] = []
        self.succeeded = False
        self._started = False

    # ---- measurements ---------------------------------------------------------------------------------
    def deviation(self) -> tuple[float, float]:
        """(distance to the tube's centre line, arc length of the nearest path point)."""
        d = np.linalg.norm(self.path - self.env.grip_pos(), axis=1)
        k = int(np.argmin(d))
        return float(d[k]), float(self.arc[k])

    # ---- Teleoperator ---------------------------------------------------------------------------------
    def engaged(self, obs=None) -> bool:
        """Whether the operator acts this period (first watching what the last period did)."""
        if not self.cfg.enabled:
            return False
        if self._started:
            self.succeeded = self.succeeded or bool(self.env.task.success(self.env.model, self.env.data))
            self._watch(self.succeeded)
        self._started = True
        if self.countdown is not None:
            if self.countdown <= 0:
                self.countdown = None
                self.in_control, self.control_left = True, self.cfg.length
                self.takeovers += 1
                self.triggers.append(self.last_trigger)
                self.expert.reset(takeover=True)
            else:
                self.countdown -= 1
        return self.in_control

    def action(self, obs=None) -> np.ndarray:
        """The operator's command this period (it hands back after ``length`` periods or its plan)."""
        action = self.expert.act()
        self.control_left -= 1
        if self.control_left <= 0 or self.expert.done:
            self.in_control = False  # hand back after this period
            self.since_progress = 0
            self.best_progress = self.deviation()[1]
        return action

    def _watch(self, success: bool) -> None:
        """Update the triggers (only while the policy is in control)."""
        if self.in_control or self.countdown is not None:
            return
        dist, progress = self.deviation()
        if progress > self.best_progress + self.cfg.progress_eps:
            self.best_progress, self.since_progress = progress, 0
        else:
            self.since_progress += 1
        trigger = ""
        if dist > self.cfg.tube:
            trigger = f"left the tube ({dist:.3f} m)"
        elif self.since_progress >= self.cfg.stall_steps and not success:
            trigger = f"stalled for {self.since_progress} steps"
        if trigger and self.takeovers < self.cfg.max_takeovers:
            self.countdown, self.last_trigger = self.cfg.delay, trigger
