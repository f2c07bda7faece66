"""Command-line entry points (Hydra; configs in ``configs/``)."""

from vla.errors import InputError
from vla.hydra_utils import CONFIG_DIR

__all__ = ["CONFIG_DIR", "SIMULATORS", "simulator"]

SIMULATORS = ("mujoco", "libero")


def simulator(argv: list[str]) -> tuple[str, list[str]]:
    """The ``env=`` of a command line (default mujoco) and the rest of it. ``env`` is also ``vla-train``'s
    config group in the shared config folder, so the tools read it before Hydra composes.

    Raises:
        InputError: ``env=`` names another simulator.
    """
    chosen = [a.split("=", 1)[1] for a in argv if a.startswith("env=")]
    rest = [a for a in argv if not a.startswith("env=")]
    env = chosen[-1] if chosen else "mujoco"
    if env not in SIMULATORS:
        raise InputError(f"env={env}: use one of {', '.join(SIMULATORS)}")
    return env, rest
