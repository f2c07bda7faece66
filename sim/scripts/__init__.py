"""Command-line entry points (Hydra; configs in ``configs/``)."""

from vla.hydra_utils import CONFIG_DIR

__all__ = ["CONFIG_DIR"]
