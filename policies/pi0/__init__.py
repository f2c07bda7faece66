"""LeRobot's pi0 and pi0.5 behind our ``Policy`` protocol (any size)."""

from policies.pi0.config import GemmaSize, PI0AdapterConfig, PI05AdapterConfig, SiglipSize
from policies.pi0.policy import PI0Adapter, PI05Adapter

__all__ = ["GemmaSize", "PI0Adapter", "PI0AdapterConfig", "PI05Adapter", "PI05AdapterConfig", "SiglipSize"]
