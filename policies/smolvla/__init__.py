"""LeRobot's SmolVLA behind our ``Policy`` protocol (registered as ``"smolvla"``)."""

from policies.smolvla.config import SmolVLAAdapterConfig
from policies.smolvla.policy import SmolVLAAdapter

__all__ = ["SmolVLAAdapter", "SmolVLAAdapterConfig"]
