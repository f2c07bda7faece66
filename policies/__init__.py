"""Policy models; importing this registers every policy in ``vla.policy.POLICIES``."""

import policies.smolvla  # noqa: F401  (registration; imports lerobot's SmolVLA)
from policies import flow_matching  # noqa: F401  (registration)
