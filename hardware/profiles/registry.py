"""The registry of arm profiles; each arm's module registers its profile here."""

from __future__ import annotations

from vla.registry import Registry
from vla.robot import RobotProfile

PROFILES: Registry[RobotProfile] = Registry("robot profile")
