"""The task a training run is about, and the limits that follow from it, taken from the data.

A preset (``experiment=posttrain_*``) names no task: the data does. :func:`resolve_task` fills in

- ``env.task`` (the task evaluated during training and in the closed loop): unset, the data's
  (the sidecar's ``extra.task_name``, which ``vla-collect`` and ``vla-rollout`` write per episode); set, it
  must be among the data's tasks;
- the critic's ``algo.critic.reward.t_max`` (T_max, which normalises returns): unset (null), the task's
  episode step limit, asked of the simulator through ``env.module`` (``episode_limit(task)``, as
  ``vla-tasks`` lists it; training never imports the simulator itself); for a task the simulator does not
  know (real-robot data) or data that names no task, the longest episode in the data.

A plain LeRobot dataset has no sidecar and names no task: with evaluation on (``env=sim``), ``env.task``
must then be given.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from vla.data.reader import read_episode_info
from vla.errors import InputError
from vla.evaluation import episode_limit


def data_tasks(roots: list[str], max_episodes: int | None = None) -> tuple[Counter[str], int]:
    """Episodes per task name in ``roots`` (sidecar ``extra.task_name``; episodes without one are not
    counted) and the longest episode's length (frames)."""
    tasks: Counter[str] = Counter()
    longest = 0
    for root in roots:
        for e in read_episode_info(root)[:max_episodes]:
            name = e.extra.get("task_name")
            if isinstance(name, str) and name:
                tasks[name] += 1
            longest = max(longest, e.length)
    return tasks, longest


def resolve_task(cfg: Any) -> None:
    """Fill in ``cfg.env.task`` and the critic's ``t_max`` from the data where unset (in place; see the
    module docstring) and print one line saying what was taken from where.

    Raises:
        InputError: Several tasks in the data and ``env.task`` unset; ``env.task`` not among the data's
            tasks; evaluation on and no task anywhere.
    """
    tasks, longest = data_tasks(cfg.data.resolved_roots(), cfg.data.max_episodes)
    said: list[str] = []
    if cfg.env.task is None and len(tasks) > 1:
        counts = ", ".join(f"{t}: {n} episodes" for t, n in tasks.most_common())
        raise InputError(f"the data holds several tasks ({counts}): pass env.task=<the one to evaluate>")
    if cfg.env.task is None and tasks:
        cfg.env.task = next(iter(tasks))
        said.append(f"env.task={cfg.env.task} (from the data)")
    elif cfg.env.task is not None and tasks and cfg.env.task not in tasks:
        names = ", ".join(sorted(tasks))
        raise InputError(
            f"env.task={cfg.env.task} but the data (data.roots) is of task {names}: "
            "leave env.task unset or train on data of that task"
        )
    if cfg.env.task is None and cfg.env.runner:
        raise InputError(
            "env.task is needed for evaluation during training and the data names no task (a plain LeRobot "
            "dataset): pass env.task=<name> or env=none"
        )
    reward = _critic_reward(cfg.algo)
    if reward is not None and reward.get("t_max") is None:
        limit = episode_limit(cfg.env.module, cfg.env.task) if cfg.env.task else None
        reward["t_max"] = limit or longest or None
        why = f"{cfg.env.task}'s episode limit" if limit else "the longest episode in the data"
        said.append(f"algo.critic.reward.t_max={reward['t_max']} ({why})")
    if said:
        print(", ".join(said), flush=True)


def _critic_reward(algo: Any) -> dict[str, Any] | None:
    """The critic's reward fields in the algorithm's config (None: the algorithm has no critic)."""
    critic = algo.get("critic") if isinstance(algo, dict) else None
    if not isinstance(critic, dict):
        return None
    reward = critic.setdefault("reward", {})
    return reward if isinstance(reward, dict) else None
