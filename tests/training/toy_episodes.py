"""A toy episode dataset for critic tests: success is visible in the observations.

Successful episodes show state[0] = +1 and a bright image, failures state[0] = -1 and a dark one; some
successful episodes have a human takeover in the middle (is_intervention). Cameras, state and action
sizes match ``debug_config()``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vla.data import EpisodeSpec, EpisodeWriter

SPEC = EpisodeSpec(cameras={"agentview": (32, 32), "wrist": (32, 32)}, state_dim=8, action_dim=8, fps=10)


def toy_frame(img, state, action, human: bool, reward: float, done: bool, task: str) -> dict:
    """One frame of a toy dataset: the same image on both cameras, the action also as the proposal."""
    return {
        "observation.images.agentview": img,
        "observation.images.wrist": img,
        "observation.state": state,
        "action": action,
        "complementary_info.policy_action": action,
        "complementary_info.is_intervention": np.array([human]),
        "next.reward": np.array([reward], dtype=np.float32),
        "next.done": np.array([done]),
        "task": task,
    }


def write_toy_episodes(
    root: Path, n: int = 16, seed: int = 0, source: str = "policy", flip_success: bool = False
) -> Path:
    """``flip_success``: the same frames with the opposite episode outcomes (labels only)."""
    rng = np.random.default_rng(seed)
    with EpisodeWriter(root, SPEC) as w:
        for e in range(n):
            success = e % 2 == 0
            takeover = success and e % 4 == 0
            length = int(rng.integers(8, 13))
            sign = 1.0 if success else -1.0
            for i in range(length):
                state = rng.normal(0, 0.1, 8).astype(np.float32)
                state[0] = sign
                state[1] = i / length
                action = (sign * np.linspace(0.1, 0.8, 8) + rng.normal(0, 0.05, 8)).astype(np.float32)
                level = 200 if success else 40
                img = np.clip(rng.normal(level, 10, (32, 32, 3)), 0, 255).astype(np.uint8)
                human = takeover and i >= length // 2
                end = i == length - 1
                w.add_frame(toy_frame(img, state, action, human, float(success and end), end, "toy task"))
            w.end_episode(success=success != flip_success, source=source)
    return root
