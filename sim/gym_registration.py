"""Register every task with gymnasium as ``vla/<task>-v0`` (e.g. ``gym.make("vla/pick_place-v0")``)."""

import gymnasium as gym

from sim.tasks.base import TASKS


def register_all() -> list[str]:
    ids = []
    for name in TASKS:
        env_id = f"vla/{name}-v0"
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="sim.env:TabletopEnv", kwargs={"task": name})
        ids.append(env_id)
    return ids
