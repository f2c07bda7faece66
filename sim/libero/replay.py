"""``vla-replay env=libero dataset=<dir>``: a LIBERO dataset's actions, open loop, each episode from its
recorded initial simulator state, scored by the suite's success predicate (as ``vla-replay`` does for our
tasks).

The state comes from the episode's ``extra`` (``libero_suite``, ``libero_task``, ``libero_state``: the
flattened MuJoCo state LIBERO's ``set_init_state`` takes), which ``vla-libero2dataset`` stores from each
demo's first ``states`` row. LeRobot's published LIBERO datasets hold no simulator state, so their episodes
cannot be replayed exactly; they are refused by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from sim.libero.suite import LiberoTask, make_env, suite_tasks
from vla.data.reader import iter_episodes, read_episode_info
from vla.data.schema import ACTION, SIDECAR_FILE
from vla.errors import InputError

EXTRA = ("libero_suite", "libero_task", "libero_state")


def replay_actions(env: Any, state: np.ndarray, actions: np.ndarray) -> bool:
    """From ``state``, execute ``actions`` [T, 7]; True once the task's goal predicate held."""
    env._ensure_env()
    inner = env._env
    inner.reset()
    inner.set_init_state(np.asarray(state, dtype=np.float64))
    for a in actions:
        inner.step(np.asarray(a, dtype=np.float64))
        if inner.check_success():
            return True
    return False


def replay_libero(
    dataset: str | Path, episodes: list[int] | None = None, progress: bool = True
) -> tuple[int, int]:
    """Replay ``episodes`` (default all) of ``dataset``; returns (successes, episodes).

    Raises:
        InputError: no such episodes, or an episode without its recorded LIBERO state (named).
    """
    root = Path(dataset)
    infos = [i for i in read_episode_info(root) if episodes is None or i.episode_index in set(episodes)]
    if not infos:
        raise InputError(f"{root}: no episodes to replay (episodes={episodes})")
    for info in infos:
        missing = [k for k in EXTRA if k not in info.extra]
        if missing:
            raise InputError(
                f"{root / SIDECAR_FILE}: episode {info.episode_index}: no "
                f"{', '.join('extra.' + k for k in missing)}: "
                "replay needs each episode's initial LIBERO state (vla-libero2dataset stores it; LeRobot's "
                "LIBERO datasets hold none)"
            )
    envs: dict[tuple[str, int], Any] = {}
    by_index = {i.episode_index: i for i in infos}
    ok = 0
    try:
        for index, ep in tqdm(
            iter_episodes(root, list(by_index), keys=[ACTION]),
            total=len(infos),
            desc="replay",
            disable=not progress,
        ):
            extra = by_index[index].extra
            key = (str(extra["libero_suite"]), int(extra["libero_task"]))
            if key not in envs:
                task: LiberoTask = suite_tasks(key[0], [key[1]])[0]
                envs[key] = make_env(task, (64, 64))
            ok += replay_actions(envs[key], np.asarray(extra["libero_state"]), ep[ACTION])
    finally:
        for env in envs.values():
            env.close()
    return ok, len(infos)
