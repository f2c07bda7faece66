"""RoboStress: joint-level execution-error scenarios on our MuJoCo arm (``stress=<scenario>`` in vla-eval).

Four error models, each scaled by a severity s in [0, 1] and varied per joint by a seeded factor in
[0.5, 1.5] (so a scenario is the same robot for every episode of a run):

- **friction**: Coulomb friction ``frictionloss += s * 8 Nm * f_j`` and viscous damping
  ``damping *= 1 + 30 s f_j`` on the arm joints (MuJoCo has no Stribeck term; Coulomb + viscous only).
  The joint stops short of the command and lags it.
- **backlash**: a play (dead-band) operator of width b = s * 0.06 rad * f_j on the commanded joint
  position: the actuator target only moves once the command has crossed the band, so the joint lags the
  command by up to b / 2 against the direction of motion.
- **compliance**: actuator stiffness kp *= 1 - 0.8 s min(f_j, 1) (damping kept): q_exec = q_cmd -
  tau_load / k, the arm sags and lags more under load. The factor is clipped at 1, so at s = 1 every joint
  keeps 0.2-0.6 of its stiffness (a factor up to 1.25 would leave some joints none, and the arm could not
  follow any command).
- **gravity**: gravity-compensation error, ``gravcomp = 1 - s * f_j`` on the arm links ((1 + delta) G(q)
  mismatch with delta = -s f_j): the arm sags below its commands.

The seven scenarios: each alone, ``wear`` (friction + backlash), ``payload`` (gravity + compliance) and
``all``. ``apply_stress`` changes the env's model in place and installs the backlash as a command filter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.env import TabletopEnv
from sim.robots.panda import PANDA

ERRORS = ("friction", "backlash", "compliance", "gravity")
SCENARIOS: dict[str, tuple[str, ...]] = {
    "friction": ("friction",),
    "backlash": ("backlash",),
    "compliance": ("compliance",),
    "gravity": ("gravity",),
    "wear": ("friction", "backlash"),
    "payload": ("gravity", "compliance"),
    "all": ERRORS,
}


@dataclass
class StressConfig:
    scenario: str | None = None  # one of SCENARIOS; None = nominal
    severity: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if self.scenario is not None and self.scenario not in SCENARIOS:
            raise ValueError(f"stress={self.scenario!r}; scenarios: {sorted(SCENARIOS)}")
        if not 0.0 <= self.severity <= 1.0:
            raise ValueError(f"stress severity={self.severity} not in [0, 1]")


class Backlash:
    """Play operator per arm joint: y <- clip(y, c - b/2, c + b/2); the gripper passes through."""

    def __init__(self, width: np.ndarray) -> None:
        self.half = np.asarray(width, dtype=np.float64) / 2
        self.y: np.ndarray | None = None

    def reset(self, command: np.ndarray) -> None:
        self.y = np.asarray(command[:7], dtype=np.float64).copy()

    def __call__(self, command: np.ndarray) -> np.ndarray:
        c = np.asarray(command, dtype=np.float64).copy()
        if self.y is None:
            self.reset(c)
        assert self.y is not None
        self.y = np.clip(self.y, c[:7] - self.half, c[:7] + self.half)
        c[:7] = self.y
        return c


def _arm_dofs(env: TabletopEnv) -> np.ndarray:
    m = env.model
    return np.array([m.jnt_dofadr[m.joint(PANDA.prefix + j).id] for j in PANDA.arm_joints])


def _arm_bodies(env: TabletopEnv) -> np.ndarray:
    m = env.model
    return np.array([m.jnt_bodyid[m.joint(PANDA.prefix + j).id] for j in PANDA.arm_joints])


def _friction(env: TabletopEnv, s: float, f: np.ndarray) -> None:
    dofs = _arm_dofs(env)
    env.model.dof_frictionloss[dofs] += s * 8.0 * f
    env.model.dof_damping[dofs] *= 1.0 + 30.0 * s * f


def _backlash(env: TabletopEnv, s: float, f: np.ndarray) -> None:
    env.command_filters.append(Backlash(s * 0.06 * f))


def _compliance(env: TabletopEnv, s: float, f: np.ndarray) -> None:
    m = env.model
    scale = 1.0 - 0.8 * s * np.minimum(f, 1.0)  # at s = 1: 0.2-0.6 of the stiffness, never zero
    m.actuator_gainprm[:7, 0] *= scale
    m.actuator_biasprm[:7, 1] *= scale


def _gravity(env: TabletopEnv, s: float, f: np.ndarray) -> None:
    bodies = _arm_bodies(env)
    # every link from each arm joint's body down the chain (the hand included) loses compensation
    m = env.model
    for b in range(m.nbody):
        chain, x = [], b
        while x > 0:
            chain.append(x)
            x = m.body_parentid[x]
        hits = [k for k, body in enumerate(bodies) if body in chain]
        if hits and m.body_gravcomp[b] > 0:
            m.body_gravcomp[b] = max(0.0, 1.0 - s * float(f[max(hits)]))


APPLY: dict[str, Callable[[TabletopEnv, float, np.ndarray], None]] = {
    "friction": _friction,
    "backlash": _backlash,
    "compliance": _compliance,
    "gravity": _gravity,
}


def apply_stress(env: TabletopEnv, cfg: StressConfig) -> TabletopEnv:
    """Turn ``env`` into the stressed robot of ``cfg`` (in place; returns it)."""
    if cfg.scenario is None or cfg.severity == 0.0:
        return env
    rng = np.random.default_rng([cfg.seed, 7])
    for err in SCENARIOS[cfg.scenario]:
        APPLY[err](env, cfg.severity, rng.uniform(0.5, 1.5, 7))
    return env
