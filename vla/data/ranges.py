"""Plausible state and action values: the robot profile's joint ranges, else a robust outlier rule.

A finite but impossible value (one arm joint at 1e6 rad) passes the NaN/inf check and wrecks the
normalisation statistics. :class:`ValueCheck` finds it and the checks refuse the dataset with one line naming
the file, the episode, the frame and the field (:func:`vla.checks.check_dataset` before training and replay,
:func:`vla.data.validate.validate_dataset`). Two rules, per vector feature of :data:`CHECKED_KEYS`:

- **The robot profile**, when ``meta/info.json``'s ``robot_type`` names a registered
  :class:`~vla.robot.RobotProfile` and the vector has the profile's width (arm joints in profile order, then
  the gripper: ``profile.action_dim``) and the state and the action have the same width (joint-position
  control; LIBERO's datasets name ``panda`` for an end-effector pose and 7-d end-effector commands). Each arm
  joint must lie in ``[lower - JOINT_MARGIN, upper + JOINT_MARGIN]`` (rad); the gripper in ``[closed, open]``
  widened on each side by ``GRIPPER_MARGIN`` times its range (the gripper's own units: m, %). Measured on the
  sim (5 tasks x clean, noisy, DART and sloppy experts, 3 seeds each; policy rollouts with simulated
  takeovers): recorded arm joints and commands never leave the Panda's ranges; the finger position exceeds
  ``open`` by up to 0.014 m (35 % of its range, a DART drawer episode) when an object pushes the fingers.
- **The outlier rule** otherwise (no ``robot_type``, an unknown one, or another width): per dimension d over
  every frame of the dataset, ``|x - median_d| <= OUTLIER_FACTOR * max(1.4826 * MAD_d, OUTLIER_FLOOR * M)``
  with ``M = max(1, max_d median_d |x_d|)``, the vector's typical magnitude. Medians and MADs tolerate up to
  half the frames being corrupt; the floor keeps near-constant dimensions (a gripper that stays open, a
  joint that rarely moves) from tripping on their first move: every value within ``10 M`` of its median
  passes whatever the spread, and a joint in rad (``M`` >= 1) may swing 10 rad, so only values orders of
  magnitude off trip.

The profiles live in ``hardware/profiles``, a layer above this one, so the callers above it hand them in, as
they hand policy modules to :func:`vla.checks.check_checkpoint`: ``profiles=`` on the checks (a registry, or
a module name such as :data:`PROFILES_MODULE` imported at run time): ``vla-train``, ``vla-rollout``,
``vla-replay`` and ``python -m vla.data.validate`` pass them. A check given none uses the outlier rule only.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vla.data.errors import DatasetError
from vla.data.schema import ACTION, STATE

PROFILES_MODULE = "hardware.profiles"  # a module with a ``PROFILES`` registry of RobotProfile
JOINT_MARGIN = 0.2  # rad beyond an arm joint's position limit (sim: 0; calibration offsets: a few degrees)
GRIPPER_MARGIN = 1.0  # gripper ranges beyond [closed, open] on each side (sim: up to 0.35)
OUTLIER_FACTOR = 50.0  # robust scales from the median
OUTLIER_FLOOR = 0.2  # the smallest robust scale, as a share of the vector's typical magnitude M
CHECKED_KEYS = (STATE, ACTION)  # policy_action (a policy's unclamped proposal) feeds no statistics


@dataclass(frozen=True)
class Bounds:
    """Per dimension: the accepted interval, and how it was found (for the message)."""

    lower: np.ndarray  # [D]
    upper: np.ndarray  # [D]
    rule: list[str]  # [D] the rule, for each dimension's message
    names: tuple[str, ...] = ()  # the dimensions' names where the rule knows them (a profile's joints)


def find_profile(robot_type: str | None, profiles: Any = None) -> Any | None:
    """The registered robot profile named ``robot_type``, or None.

    Args:
        robot_type: ``meta/info.json``'s ``robot_type``.
        profiles: A registry of profiles (``in``, ``get``), or the name of a module that holds one as
            ``PROFILES`` (imported here); None: no profile (the outlier rule applies).
    """
    if not robot_type or profiles is None:
        return None
    if isinstance(profiles, str):
        try:
            profiles = importlib.import_module(profiles).PROFILES
        except (ImportError, AttributeError):
            return None
    return profiles.get(robot_type) if robot_type in profiles else None


def profile_bounds(profile: Any, width: int) -> Bounds | None:
    """The profile's ranges widened by the margins, when the vector has the profile's width."""
    if width != profile.action_dim:
        return None
    lim = profile.limits
    rule = [
        f"the '{profile.name}' profile's range [{lo:.4g}, {hi:.4g}] rad +- {JOINT_MARGIN} (JOINT_MARGIN)"
        for lo, hi in zip(lim.lower, lim.upper, strict=True)
    ]
    lower = [lo - JOINT_MARGIN for lo in lim.lower]
    upper = [hi + JOINT_MARGIN for hi in lim.upper]
    if profile.gripper is not None:
        lo, hi = profile.gripper.range
        margin = GRIPPER_MARGIN * (hi - lo)
        lower.append(lo - margin)
        upper.append(hi + margin)
        rule.append(
            f"the '{profile.name}' profile's gripper range [{lo:.4g}, {hi:.4g}] {profile.gripper.units} "
            f"+- {GRIPPER_MARGIN:g} x its range (GRIPPER_MARGIN)"
        )
    return Bounds(np.asarray(lower), np.asarray(upper), rule, profile.action_names)


def outlier_bounds(values: np.ndarray) -> Bounds:
    """The outlier rule's interval per dimension from every frame ``values`` [N, D] (finite)."""
    x = np.asarray(values, dtype=np.float64)
    median = np.median(x, axis=0)
    mad = np.median(np.abs(x - median), axis=0)
    magnitude = max(1.0, float(np.max(np.median(np.abs(x), axis=0))))
    half = OUTLIER_FACTOR * np.maximum(1.4826 * mad, OUTLIER_FLOOR * magnitude)
    rule = [
        f"the dataset median {m:.4g} +- {h:.4g} (outlier rule: {OUTLIER_FACTOR:g} robust scales; no robot "
        "profile of this width is named by info.json robot_type)"
        for m, h in zip(median, half, strict=True)
    ]
    return Bounds(median - half, median + half, rule)


@dataclass
class ValueCheck:
    """Gathers the :data:`CHECKED_KEYS` columns file by file, then checks them together (the outlier rule
    needs every frame).

    Attributes:
        features: ``meta/info.json``'s features.
        robot_type: ``meta/info.json``'s ``robot_type``.
        profiles: Where profiles are looked up (see :func:`find_profile`; None: the process's).
        notes: Why a named profile was not used (for the validator's warnings).
        checked: The state and action features (their names under a key map, ``data.keys``).
    """

    features: dict[str, Any]
    robot_type: str | None
    profiles: Any = None
    notes: list[str] = field(default_factory=list)
    checked: tuple[str, ...] = CHECKED_KEYS
    _parts: dict[str, list[tuple[Path, np.ndarray, np.ndarray, np.ndarray]]] = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        return [k for k in self.checked if k in self.features]

    def add(self, path: Path, key: str, values: np.ndarray, episodes: np.ndarray, frames: np.ndarray) -> None:
        """One data file's finite ``values`` [N, D] of ``key``, with each row's episode and frame index."""
        self._parts.setdefault(key, []).append((path, values, episodes, frames))

    def check(self) -> None:
        """Raises :class:`DatasetError` at the first value outside its bounds (file order, then row)."""
        profile = find_profile(self.robot_type, self.profiles)
        widths = {
            k: p[0][1].shape[1] for k in self.keys if (p := [q for q in self._parts.get(k, []) if len(q[1])])
        }
        if profile is not None and len(set(widths.values())) > 1 and profile.action_dim in widths.values():
            # the profile's ranges are joint ranges: they hold where the action is a target of the state's
            # joints (joint-position control), not where it is another space (LIBERO's end-effector commands,
            # whose datasets name robot_type "panda")
            self.notes.append(
                f"robot_type '{self.robot_type}': {' and '.join(f'{k!r} ({w})' for k, w in widths.items())} "
                "differ in width, so the actions are no joint targets: checked with the outlier rule"
            )
            profile = None
        for key in self.keys:
            parts = [p for p in self._parts.get(key, []) if len(p[1])]
            if not parts:
                continue
            width = parts[0][1].shape[1]
            bounds = profile_bounds(profile, width) if profile is not None else None
            if profile is not None and bounds is None:
                self.notes.append(
                    f"robot_type '{self.robot_type}' names a profile of {profile.action_dim} values but "
                    f"'{key}' has {width}: checked with the outlier rule"
                )
            if bounds is None:
                bounds = outlier_bounds(np.concatenate([p[1] for p in parts]))
            for path, values, episodes, frames in parts:
                self._refuse_outside(path, key, values, episodes, frames, bounds)

    def _refuse_outside(
        self,
        path: Path,
        key: str,
        values: np.ndarray,
        episodes: np.ndarray,
        frames: np.ndarray,
        bounds: Bounds,
    ) -> None:
        outside = (values < bounds.lower) | (values > bounds.upper)  # [N, D]
        rows = np.flatnonzero(outside.any(axis=1))
        if not len(rows):
            return
        r = int(rows[0])
        d = int(np.flatnonzero(outside[r])[0])
        names = self.features[key].get("names")
        names = names if isinstance(names, list) and len(names) == values.shape[1] else bounds.names
        name = f" ({names[d]})" if d < len(names) else ""
        raise DatasetError(
            f"{path}: episode {int(episodes[r])}: field '{key}'[{d}]{name} = {float(values[r, d]):.6g} at "
            f"frame {int(frames[r])} is outside {bounds.rule[d]}; fix or drop the episode"
        )
