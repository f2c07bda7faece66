"""A toy task with human takeovers, for learning tests of the preference methods (APO).

The point of ``two_modes.py`` moves from p ~ U(0, 0.1) to the goal p >= 1. Demonstrations (``source`` demo)
drive at v = +0.2 from the start. Intervention episodes (``source`` policy) start with the policy's bad
habit, v = -0.05 for 5 frames away from the goal, after which a human takes over
(``complementary_info.is_intervention``) at v = +0.2 until the goal: they succeed, so filtering by success
keeps the bad frames, and near the start the data holds more bad frames than demo frames.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from toy_episodes import toy_frame
from two_modes import SPEC

from vla.data import EpisodeWriter

GOOD, BAD, BAD_FRAMES = 0.2, -0.05, 5


def write_takeovers(root: Path, demos: int = 10, takeovers: int = 20, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    kinds = ["demo"] * demos + ["takeover"] * takeovers
    rng.shuffle(kinds)
    with EpisodeWriter(root, SPEC, durable=False) as w:
        for kind in kinds:
            p, t = float(rng.uniform(0.0, 0.1)), 0
            while p < 1.0:
                human = kind == "takeover" and t >= BAD_FRAMES
                v = GOOD if kind == "demo" or human else BAD
                state = rng.normal(0, 0.01, 8).astype(np.float32)
                state[0] = p
                action = np.full(8, v, np.float32) + rng.normal(0, 0.005, 8).astype(np.float32)
                p, t = p + v, t + 1
                img = np.full((32, 32, 3), 128, np.uint8)
                w.add_frame(toy_frame(img, state, action, human, float(p >= 1.0), p >= 1.0, "reach the goal"))
            w.end_episode(success=True, source="demo" if kind == "demo" else "policy")
    return root


def write_patterns(root: Path, episodes: list[tuple[str, bool, str]], seed: int = 0) -> Path:
    """Episodes spelled frame by frame, for label tests: each ``(pattern, success, source)``, the pattern's
    ``p`` a policy frame (action BAD) and ``h`` a human takeover frame (action GOOD)."""
    rng = np.random.default_rng(seed)
    img = np.full((32, 32, 3), 128, np.uint8)
    with EpisodeWriter(root, SPEC, durable=False) as w:
        for pattern, success, source in episodes:
            for t, c in enumerate(pattern):
                state = rng.normal(0, 0.01, 8).astype(np.float32)
                state[0] = t / len(pattern)
                action = np.full(8, GOOD if c == "h" else BAD, np.float32)
                end, reward = t == len(pattern) - 1, float(success and t == len(pattern) - 1)
                w.add_frame(toy_frame(img, state, action, c == "h", reward, end, "reach the goal"))
            w.end_episode(success=success, source=source)
    return root
