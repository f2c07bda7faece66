"""Synthetic episodes for the episode-data tests: a tiny spec and deterministic frames."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from vla.data import EpisodeSpec, EpisodeWriter

SPEC_KW: dict[str, Any] = {
    "cameras": {"front": (16, 16), "wrist": (16, 16)},
    "state_dim": 4,
    "action_dim": 3,
    "fps": 10,
}


def make_spec() -> EpisodeSpec:
    return EpisodeSpec(**SPEC_KW)


def make_frame(episode: int, i: int, length: int) -> dict[str, Any]:
    """A deterministic frame: values depend only on (episode, i)."""
    rng = np.random.default_rng(1000 * episode + i)
    action = rng.standard_normal(3).astype(np.float32)
    return {
        "observation.images.front": rng.integers(0, 256, (16, 16, 3), dtype=np.uint8),
        "observation.images.wrist": rng.integers(0, 256, (16, 16, 3), dtype=np.uint8),
        "observation.state": rng.standard_normal(4).astype(np.float32),
        "action": action,
        "complementary_info.policy_action": action + np.float32(0.5),
        "complementary_info.is_intervention": np.array([i % 3 == 0]),
        "next.reward": np.array([float(i == length - 1)], dtype=np.float32),
        "next.done": np.array([i == length - 1]),
        "task": f"task {episode % 2}",
    }


def write_episodes(
    root: Path, n: int, length: int = 5, *, start: int = 0, resume: bool = False
) -> list[list[dict[str, Any]]]:
    """Writes n episodes (episode e has length + e frames) and returns the frames written."""
    written = []
    with EpisodeWriter(root, make_spec(), resume=resume) as w:
        for e in range(start, start + n):
            frames = [make_frame(e, i, length + e) for i in range(length + e)]
            for f in frames:
                w.add_frame(dict(f))
            assert w.end_episode(success=e % 2 == 0, source="scripted", extra={"seed": e}) == e
            written.append(frames)
    return written
