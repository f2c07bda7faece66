"""Our compact flow-matching VLA with action chunking."""

from policies.flow_matching.config import FlowMatchingConfig, debug_config
from policies.flow_matching.policy import FlowMatchingPolicy

__all__ = ["FlowMatchingConfig", "FlowMatchingPolicy", "debug_config"]
