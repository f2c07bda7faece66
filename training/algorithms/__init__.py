"""Post-training algorithms, registered by name (``algo=<name>``)."""

from training.algorithms import apo, credit, flow_dpo, hg_dagger, sft  # noqa: F401  (registration)
from training.algorithms.base import ALGORITHMS, GradientAlgorithm, OptimConfig

__all__ = ["ALGORITHMS", "GradientAlgorithm", "OptimConfig"]
