"""Takeover and hand-back: the one place that decides, each period, whether the operator or the policy acts.

HG-DAgger semantics (Kelly et al. 2019), for any :class:`~vla.robot.Teleoperator` (the simulated
operator, a gamepad, a leader arm, a ROS topic):

- the policy proposes every period, also while the operator drives, so its proposal is recorded beside
  the operator's command (``policy_action``) and every operator period is marked ``is_intervention``;
- while the operator is engaged, its command is what runs;
- at hand-back the policy's executor is reset (``on_hand_back``): it replans from the state the operator
  left instead of finishing a chunk planned before the takeover;
- a switch either way starts a new command stream (``fresh``), so the safety layer interpolates the jump
  instead of faulting on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vla.robot import Observation, Robot, Teleoperator


@dataclass
class Decision:
    action: np.ndarray  # what runs: the operator's command while engaged, else the policy's proposal
    policy_action: np.ndarray  # the policy's proposal
    is_intervention: bool
    fresh: bool  # the start of a new command stream (a new chunk, a switch)


class Takeover:
    """See the module docstring. ``teleop=None``: the policy always acts."""

    def __init__(self, teleop: Teleoperator | None, on_hand_back: Callable[[], None]) -> None:
        self.teleop, self.on_hand_back = teleop, on_hand_back
        self.engaged = False
        self.takeovers = 0
        self.intervention_steps = 0

    def reset(self, robot: Robot) -> None:
        self.engaged = False
        self.takeovers = self.intervention_steps = 0
        if self.teleop is not None:
            self.teleop.reset(robot)

    def step(self, obs: Observation, propose: Callable[[], tuple[np.ndarray, bool]]) -> Decision:
        """``propose()`` -> (the policy's action, whether it starts a fresh chunk)."""
        engaged = self.teleop is not None and bool(self.teleop.engaged(obs))
        handed_back = self.engaged and not engaged
        if handed_back:
            self.on_hand_back()
        proposal, fresh = propose()
        if engaged:
            assert self.teleop is not None
            action = np.asarray(self.teleop.action(obs), dtype=np.float64)
            if action.shape != np.shape(proposal):
                raise ValueError(
                    f"teleoperator command has shape {action.shape}, the policy's {np.shape(proposal)}"
                )
            self.takeovers += not self.engaged
            self.intervention_steps += 1
            fresh = not self.engaged
        else:
            action, fresh = np.asarray(proposal, dtype=np.float64), fresh or handed_back
        self.engaged = engaged
        return Decision(action, np.asarray(proposal, dtype=np.float64), engaged, fresh)
