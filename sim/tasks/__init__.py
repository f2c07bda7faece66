"""The task suite; importing this registers every task (and its gymnasium id ``vla/<task>-v0``)."""

from sim.tasks import drawer, pick_place, push, reach, stack  # noqa: F401  (registration)
from sim.tasks.base import TASKS, Phase, Task

__all__ = ["TASKS", "Phase", "Task"]
