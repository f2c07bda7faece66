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


VIDEO_SIZE = (32, 32)  # lerobot's AV1 encoder (SVT-AV1) dies with SIGFPE on 16 x 16 frames


def write_video_episodes(root: Path, n: int = 2, length: int = 3) -> Path:
    """``n`` episodes of ``length`` frames with the cameras stored as mp4 videos (one file per episode and
    camera), the rest as :func:`make_frame`."""
    spec = EpisodeSpec(
        **{**SPEC_KW, "cameras": dict.fromkeys(SPEC_KW["cameras"], VIDEO_SIZE)}, use_videos=True
    )
    with EpisodeWriter(root, spec) as w:
        for e in range(n):
            for i in range(length):
                frame = make_frame(e, i, length)
                for key in spec.image_keys:
                    frame[key] = np.random.default_rng([e, i]).integers(
                        0, 256, (*VIDEO_SIZE, 3), dtype=np.uint8
                    )
                w.add_frame(frame)
            w.end_episode(success=True, source="scripted")
    return root


def garble_past_header(path: Path, keep: int = 64) -> Path:
    """Overwrites every byte of ``path`` after the first ``keep`` with seeded random bytes (same size)."""
    data = bytearray(path.read_bytes())
    data[keep:] = np.random.default_rng(0).integers(0, 256, len(data) - keep, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(data))
    return path


def set_value(path: Path, key: str, frame: int, dim: int, value: float) -> None:
    """Rewrites one value of a vector column of a data parquet file (row ``frame`` of the file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    rows = table.column(key).to_pylist()
    rows[frame][dim] = value
    col = pa.array(rows, type=table.schema.field(key).type)
    pq.write_table(table.set_column(table.schema.get_field_index(key), key, col), path)
