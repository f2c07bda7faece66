"""The decode check of a dataset's camera videos: each episode's first and last frame, per camera.

A video file that exists but is corrupt (bytes garbled past its header, a truncated copy) passes every
metadata check; unchecked, it fails only once training loads it. Two frames per episode and camera, decoded
as lerobot's reader decodes them (:class:`vla.video.FrameProbe`), catch a file that cannot be opened and a
stream that cannot be decoded, at about 5 ms a file (96 x 96 AV1, CPU). Damage inside one frame's compressed
data that the decoder conceals (wrong pixels, no error) cannot be seen this way. A progress bar shows on a
terminal from :data:`PROGRESS_FILES` files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vla.data.errors import DatasetError

PROGRESS_FILES = 500  # video files from which the check shows a progress bar (on a terminal): ~2 s
FIX = "re-encode the video or re-record the episode (or drop it)"


def video_path(root: Path, info: dict[str, Any], key: str, row: dict[str, Any]) -> Path:
    """The video file of camera ``key`` that holds an episode row's frames."""
    return root / info["video_path"].format(
        video_key=key,
        chunk_index=int(row[f"videos/{key}/chunk_index"]),
        file_index=int(row[f"videos/{key}/file_index"]),
    )


def check_videos(
    root: Path, info: dict[str, Any], features: dict[str, Any], rows_by_ep: dict[int, dict[str, Any]]
) -> int:
    """Decodes each episode's first and last frame of every ``video`` feature.

    Args:
        root: Dataset root.
        info: ``meta/info.json``.
        features: Its features.
        rows_by_ep: lerobot's episode rows by episode index (``length``, ``videos/<key>/...``).

    Returns:
        The number of video files checked.

    Raises:
        DatasetError: A file that cannot be opened (naming the episodes it holds) or a frame that cannot be
            decoded (naming the episode and frame), with the camera's field.
    """
    fps = float(info["fps"])
    jobs: dict[tuple[Path, str], list[tuple[int, int, float]]] = {}
    for key, ft in features.items():
        if ft.get("dtype") != "video":
            continue
        for ep, row in sorted(rows_by_ep.items()):
            if int(row["length"]) > 0:
                where = (video_path(root, info, key, row), key)
                jobs.setdefault(where, []).append(
                    (ep, int(row["length"]), float(row[f"videos/{key}/from_timestamp"]))
                )
    if not jobs:
        return 0
    from tqdm import tqdm

    from vla.video import FrameProbe, VideoDecodeError

    bar = tqdm(
        jobs.items(), desc="decode-check videos", unit="file", disable=len(jobs) < PROGRESS_FILES or None
    )
    for (path, key), episodes in bar:
        try:
            probe = FrameProbe(path)
        except VideoDecodeError as exc:
            eps = [ep for ep, _, _ in episodes]
            which = f"episode {eps[0]}" if len(eps) == 1 else f"episodes {eps}"
            raise DatasetError(
                f"{path}: {which}: field '{key}': video file cannot be opened ({exc}); {FIX}"
            ) from exc
        with probe:
            for ep, length, start in episodes:
                for frame in sorted({0, length - 1}):
                    try:
                        probe.decode([start + frame / fps])
                    except VideoDecodeError as exc:
                        raise DatasetError(
                            f"{path}: episode {ep}: field '{key}': frame {frame} cannot be decoded ({exc}); "
                            + FIX
                        ) from exc
    return len(jobs)
