"""Policy models; importing this registers every policy in ``vla.policy.POLICIES``."""

from policies import flow_matching  # noqa: F401  (registration)
