"""Post-training algorithms, registered by name (``algo=<name>``)."""

from training.algorithms import credit, sft  # noqa: F401  (registration)
from training.algorithms.base import ALGORITHMS, GradientAlgorithm, OptimConfig

__all__ = ["ALGORITHMS", "GradientAlgorithm", "OptimConfig"]
