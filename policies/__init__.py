"""Policy models; importing this registers every policy in ``vla.policy.POLICIES``."""

from policies import flow_matching  # noqa: F401  (registration)
from vla.policy import POLICIES

# LeRobot adapters pull in transformers and lerobot's policy code (seconds to import): loaded on first use.
POLICIES.register_lazy("smolvla", "policies.smolvla.policy:SmolVLAAdapter")
POLICIES.register_lazy("pi0", "policies.pi0.policy:PI0Adapter")
POLICIES.register_lazy("pi05", "policies.pi0.policy:PI05Adapter")
