"""A scripted operator for LIBERO's pick-and-place goals: it takes over a policy that has not picked the
object up in time and finishes the task, so LIBERO rollouts carry takeovers (HG-DAgger's intervention data,
APO's preferences) like our MuJoCo tasks' rollouts.

**Which tasks.** Goals of one ``in`` or ``on`` predicate (an object into or onto a container or a surface,
read from the task's BDDL goal): every task of ``libero_object`` ("pick up the <object> and place it in the
basket") and the pick-and-place tasks of the other suites. Other goals (open a drawer, turn on the stove,
two predicates at once) have no script: there the operator never takes over (``supported`` is False and
``triggers`` says why). It grasps top-down without turning the hand, so it completes most but not all of
them; docs/libero.md has what it placed from which initial states.

**How it drives.** Relative end-effector commands, as the policy: a proportional step toward the current
waypoint, ``clip((p_target - p_eef) / STEP, -1, 1)`` per axis, no rotation, through the phases

    above the grasp point (+12 cm) -> down to it -> close (15 periods) -> up (+RAISE)
    -> the object CARRY above the target -> open (20 periods)

moving to the next phase when within ``tol`` of the waypoint or after ``phase_limit`` periods. The grasp
point is ``GRASPS[0]`` above the object's origin; a grasp that misses (the hand rises ``MISSED`` and the
object stays) is retried at the next height of ``GRASPS``. Carrying, the hand goes where it puts the
*object* above the target, whatever offset the grasp left between them. It reads the simulator's object and
container positions (a scripted operator may).

**When it takes over.** Once ``patience`` periods have passed and the object has not been lifted (its
height less than ``LIFTED`` above where it started), it engages and keeps control to the end of the episode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vla.robot import Observation

STEP = 0.05  # m of end-effector motion asked by a relative command of 1 (a proportional gain of 1 / STEP)
LIFTED = 0.05  # m above its start: the object counts as picked up
GRASPS = (0.01, 0.04)  # m above the object's origin: the grasp heights tried in turn (a missed grasp retries)
RAISE = 0.2  # m: the hand rises this far with the object
CARRY = 0.2  # m: the object's origin is carried this far above the target's before it is released
LIFT = 3  # the phase that lifts the object: a grasp is judged while it rises
MISSED = 0.03  # m: the hand has risen this far, the object not a third of it: the grasp missed
CLOSE, OPEN = 1.0, -1.0
PLACE_PREDICATES = ("in", "on")


@dataclass
class OperatorConfig:
    """``loop.teleop`` of a LIBERO run (``enabled=false``: no operator)."""

    enabled: bool = True
    patience: int = 80  # periods the policy gets to pick the object up before the operator takes over
    tol: float = 0.01  # m: a waypoint is reached
    phase_limit: int = 60  # periods at most per phase


def place_goal(env: Any) -> tuple[str, str]:
    """(object body, target body) of the task's goal: ``(in|on obj target)``, the target's region or object
    name mapped to its body.

    Raises:
        ValueError: the goal is not one ``in``/``on`` predicate (the task has no script).
    """
    goal = env.parsed_problem["goal_state"]
    if len(goal) != 1 or goal[0][0] not in PLACE_PREDICATES:
        raise ValueError(f"no scripted operator for the goal {goal}: only one in/on predicate is scripted")
    _, obj, target = goal[0]
    names = {env.sim.model.body_id2name(i) for i in range(env.sim.model.nbody)}
    for candidate in (target, target.rsplit("_", 2)[0], target.split("_contain_region")[0]):
        for body in (f"{candidate}_main", candidate):
            if body in names:
                return f"{obj}_main", body
    raise ValueError(f"no body for the goal's target {target!r}")


class ScriptedPlaceOperator:
    """See the module docstring; a :class:`~vla.robot.Teleoperator` of a :class:`~sim.libero.robot.
    LiberoRobot` (it reads the robot's current simulator)."""

    def __init__(self, cfg: OperatorConfig | None = None) -> None:
        self.cfg = cfg or OperatorConfig()
        self.robot: Any = None
        self.triggers: list[str] = []

    def reset(self, robot: Any) -> None:
        self.robot = robot
        self.env = robot._env._env.env  # LIBERO's BDDL domain (robosuite env) under LeRobot's LiberoEnv
        self.steps, self.phase, self.in_phase, self.active = 0, 0, 0, False
        self.attempt = 0  # grasp heights tried past the first (0 on a goal without a script too)
        self.lift_to: np.ndarray | None = None
        self.triggers = []
        try:
            self.obj, self.target = place_goal(self.env)
        except ValueError as exc:
            self.supported = False
            self.triggers.append(str(exc))
            return
        self.supported = True
        self.start_z = self._pos(self.obj)[2]

    def _pos(self, body: str) -> np.ndarray:
        sim = self.env.sim
        return sim.data.body_xpos[sim.model.body_name2id(body)].copy()

    def engaged(self, obs: Observation) -> bool:
        self.steps += 1
        if not self.supported:
            return False
        stalled = self.steps > self.cfg.patience and self._pos(self.obj)[2] < self.start_z + LIFTED
        if not self.active and stalled:
            self.active = True
            self.triggers.append(f"step {self.steps}: the object not picked up after {self.cfg.patience}")
        return self.active

    def action(self, obs: Observation) -> np.ndarray:
        eef = np.asarray(self.env._eef_xpos, dtype=np.float64)
        if self.phase == LIFT and self.in_phase == 0:
            self.lift_to = eef + [0.0, 0.0, RAISE]
        waypoint, grip, hold = self._phase(eef)
        self.in_phase += 1
        reached = waypoint is not None and np.linalg.norm(waypoint - eef) < self.cfg.tol
        done = self.in_phase >= hold if hold else reached
        if self._missed(eef) and self.attempt + 1 < len(GRASPS):  # open, and try the next grasp height
            self.attempt, self.phase, self.in_phase = self.attempt + 1, 0, 0
        elif done or self.in_phase >= self.cfg.phase_limit:
            self.phase, self.in_phase = min(self.phase + 1, 5), 0
        move = np.zeros(3) if waypoint is None else np.clip((waypoint - eef) / STEP, -1.0, 1.0)
        return np.r_[move, np.zeros(3), grip]

    def _missed(self, eef: np.ndarray) -> bool:
        """Lifting, the hand has risen ``MISSED`` but the object has not left the table: the grasp missed."""
        if self.phase != LIFT or self.lift_to is None:
            return False
        risen = eef[2] - (self.lift_to[2] - RAISE)
        return risen > MISSED and self._pos(self.obj)[2] < self.start_z + MISSED / 3

    def _phase(self, eef: np.ndarray) -> tuple[np.ndarray | None, float, int]:
        """(where the hand goes, the gripper, periods to hold the phase: 0 = until the waypoint is reached).
        Carrying, the hand goes where it puts the *object* above the target, whatever offset the grasp left
        between them."""
        obj, target = self._pos(self.obj), self._pos(self.target)
        grasp = obj + [0.0, 0.0, GRASPS[self.attempt]]
        phases: list[tuple[np.ndarray | None, float, int]] = [
            (grasp + [0.0, 0.0, 0.12], OPEN, 0),
            (grasp, OPEN, 0),
            (None, CLOSE, 15),
            (self.lift_to, CLOSE, 0),
            (eef + (target + [0.0, 0.0, CARRY] - obj), CLOSE, 0),
            (None, OPEN, 20),
        ]
        return phases[self.phase]
