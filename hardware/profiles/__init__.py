"""Arm profiles (``vla.robot.RobotProfile``), one file per arm, limits cited from the makers' datasheets.

``PROFILES.get(name)`` / :func:`get_profile` return a registered profile; an unknown name lists the
known ones.
"""

from __future__ import annotations

from hardware.profiles import fr3, panda, so101, ur5e  # noqa: F401  (each registers its profile)
from hardware.profiles.registry import PROFILES
from vla.robot import RobotProfile

__all__ = ["PROFILES", "get_profile"]


def get_profile(name: str) -> RobotProfile:
    """The profile registered as ``name`` (``panda``, ``fr3``, ``ur5e``, ``so101``)."""
    return PROFILES.get(name)
