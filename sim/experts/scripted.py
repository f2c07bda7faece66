"""Scripted IK expert: follows a task's phases with a Cartesian reference moving at a fixed speed and
turns it into smooth joint-position targets. Optional noise (action noise, detours, a slow or hesitating
operator) for suboptimal data."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.env import TabletopEnv
from sim.experts.ik import ArmIK
from sim.tasks.base import Phase


@dataclass
class ExpertNoise:
    """Suboptimality and coverage knobs.

    * ``action_std`` (rad) is added to the arm targets each step (not accumulated): the *recorded*
      action is noisy, i.e. suboptimal data.
    * with probability ``detour_prob`` a free-space move first goes through a random point up to
      ``detour_scale`` m off its straight path.
    * ``speed_scale``: a slow operator in free space. In the free-space moves (the phases marked
      ``detour_ok`` and the detours inserted before them) the Cartesian reference moves at ``speed_scale``
      times the phase's speed and the yaw at that share of :attr:`ScriptedExpert.yaw_rate`; the contact
      phases (descend, grasp, lift, place) keep the task's timing, so a slow demo differs from a fast one only
      in transit. Below 1 a demo succeeds later on the same path -- slow but clean.
    * with probability ``pause_prob`` a hesitating operator holds still for ``pause_steps`` control steps
      before a free-space move (before its detour, if any): the arm's command stays where it is, the
      gripper as it was. The demo succeeds later on the same path; the extra frames make no progress and
      repeat one observation (a base SFT on pick_place with 20-step pauses in its slow demos failed: see
      docs/results.md).
    * ``aim_std`` (m): a sloppy demonstrator. Each episode draws one offset ~ N(0, aim_std^2 I_3) that
      is added to every phase goal, so the demo ends off target (on reach: a failed demo, a near miss).
      Mixed-quality data for credit methods to sort out.
    * ``aim_bias`` (m, xyz): a systematic part of that offset (a miscalibrated operator); the episode's
      offset is ``aim_bias + N(0, aim_std^2 I_3)``. Zero-mean errors partly average out under BC; a
      bias does not, so imitating such demos costs a fixed share of episodes.
    * ``execute_std`` (rad) is DART (Laskey et al. 2017): the env executes ``a* + eps``,
      eps ~ N(0, execute_std^2), while the dataset records the expert's clean ``a*``. The states then
      cover the expert's neighbourhood and the labels show the way back -- the supervision against
      compounding error that plain demos lack. ``contact_scale`` scales it in the phases that are not
      free-space moves (descend, grasp, lower, ...), where full noise would knock objects over. See
      :meth:`executed`.
    """

    action_std: float = 0.0
    detour_prob: float = 0.0
    detour_scale: float = 0.08
    speed_scale: float = 1.0
    pause_prob: float = 0.0
    pause_steps: int = 20
    execute_std: float = 0.0
    contact_scale: float = 1.0
    aim_std: float = 0.0
    aim_bias: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def active(self) -> bool:
        return (
            self.action_std > 0
            or self.detour_prob > 0
            or self.speed_scale != 1.0
            or self.pause_prob > 0
            or self.execute_std > 0
            or self.aim_std > 0
            or any(self.aim_bias)
        )


class ScriptedExpert:
    """Acts in a :class:`TabletopEnv` from privileged state; call :meth:`reset` after ``env.reset``."""

    yaw_rate = 2.0  # rad/s

    def __init__(
        self,
        env: TabletopEnv,
        noise: ExpertNoise | None = None,
        seed: int | None = None,
        ik: ArmIK | None = None,
    ) -> None:
        self.env = env
        self.noise = noise or ExpertNoise()
        self.rng = np.random.default_rng(seed)
        self.ik = ik or ArmIK()

    def reset(self, takeover: bool = False) -> None:
        """Plan from the current state. ``takeover=True``: mid-episode (a teleoperator taking over), so
        start at the task's :meth:`~sim.tasks.base.Task.takeover_phase` and the gripper's current yaw."""
        env = self.env
        self.phases: list[Phase] = list(env.task.plan(env.model, env.data))
        self.q_cmd = env.joint_state()[:7].astype(np.float64)
        self.ref = env.grip_pos()
        self.yaw = self.ik.site_yaw(self.q_cmd) if takeover else 0.0
        self.k = env.task.takeover_phase(env.model, env.data, self.phases) - 1 if takeover else -1
        self.done = False
        self.aim = np.asarray(self.noise.aim_bias, dtype=float) + (
            self.rng.normal(0.0, self.noise.aim_std, 3) if self.noise.aim_std > 0 else 0.0
        )
        self._next_phase()

    def _next_phase(self) -> None:
        self.k += 1
        if self.k >= len(self.phases):
            self.done = True
            self.k = len(self.phases) - 1
            return
        ph = self.phases[self.k]
        previous = self.phases[self.k - 1] if self.k > 0 else None
        inserted = previous is not None and previous.name in ("pause", "detour")
        hesitate = ph.detour_ok and not inserted and self.noise.pause_prob > 0  # draws nothing when off
        if hesitate and self.rng.random() < self.noise.pause_prob:
            hold, yaw = self.ref.copy(), self.yaw
            grip = previous.gripper if previous is not None else ph.gripper
            steps = self.noise.pause_steps
            self.phases.insert(self.k, Phase("pause", lambda m, d, p=hold, y=yaw: (p, y), grip, settle=steps))
            self.goal, self.goal_yaw, self.settle = hold, yaw, steps
            return
        pos, yaw = ph.target(self.env.model, self.env.data)
        self.goal, self.goal_yaw, self.settle = np.asarray(pos, dtype=float) + self.aim, float(yaw), ph.settle
        after_detour = previous is not None and previous.name == "detour"
        if ph.detour_ok and not after_detour and self.rng.random() < self.noise.detour_prob:
            mid = (self.ref + self.goal) / 2 + self.rng.uniform(-1, 1, 3) * self.noise.detour_scale
            mid[2] = max(mid[2], self.goal[2], 0.08)
            self.phases.insert(
                self.k, Phase("detour", lambda m, d, p=mid, y=yaw: (p, y), ph.gripper, ph.speed)
            )
            self.goal = mid

    def act(self) -> np.ndarray:
        """The next action [8]: arm joint targets + gripper."""
        ph = self.phases[self.k]
        dt = self.env.dt
        delta = self.goal - self.ref
        scale = self.noise.speed_scale if ph.detour_ok or ph.name == "detour" else 1.0  # free space
        step = ph.speed * scale * dt
        turn = self.yaw_rate * scale * dt
        dist = float(np.linalg.norm(delta))
        self.ref = self.goal.copy() if dist <= step else self.ref + delta / dist * step
        dyaw = self.goal_yaw - self.yaw
        self.yaw += float(np.clip(dyaw, -turn, turn))
        self.q_cmd = self.ik.solve(self.q_cmd, self.ref, self.yaw)
        reached = (
            dist <= step
            and abs(dyaw) < 1e-6
            and np.linalg.norm(self.ik.site_pos(self.q_cmd) - self.goal) < ph.tol
        )
        if reached and not self.done:
            if self.settle <= 0:
                self._next_phase()
            else:
                self.settle -= 1
        action = np.r_[self.q_cmd, ph.gripper]
        if self.noise.action_std > 0:
            action[:7] += self.rng.normal(0.0, self.noise.action_std, 7)
        return action.astype(np.float32)

    def executed(self, action: np.ndarray) -> np.ndarray:
        """What the env runs for the recorded ``action``: ``action`` plus DART noise on the arm joints."""
        if self.noise.execute_std <= 0:
            return action
        std = self.noise.execute_std * (1.0 if self.phases[self.k].detour_ok else self.noise.contact_scale)
        out = action.copy()
        out[:7] += self.rng.normal(0.0, std, 7).astype(out.dtype)
        return out


def run_expert_episode(env: TabletopEnv, expert: ScriptedExpert, seed: int, on_step=None) -> tuple[bool, int]:
    """Roll out the expert for one episode; ``on_step(obs, action, reward, terminated, info)`` per step."""
    obs, info = env.reset(seed=seed)
    expert.reset()
    success, steps = False, 0
    while True:
        action = expert.act()
        nobs, reward, terminated, truncated, info = env.step(expert.executed(action))
        steps += 1
        if on_step is not None:
            on_step(obs, action, reward, terminated or truncated, info)
        obs = nobs
        success = success or info["success"]
        if terminated or truncated or (expert.done and success):
            return success, steps
