"""Writing camera frames as an mp4 (PyAV, which ships with lerobot)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_video(path: Path, frames: dict[str, np.ndarray], fps: int) -> None:
    """Cameras side by side: ``frames`` name -> uint8 [T, H, W, 3] (same T and H)."""
    import av

    stacked = np.concatenate(list(frames.values()), axis=2)  # [T, H, sumW, 3]
    h, w = stacked.shape[1:3]
    h, w = h - h % 2, w - w % 2
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264" if "libx264" in av.codecs_available else "mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        for img in stacked:
            for packet in stream.encode(
                av.VideoFrame.from_ndarray(np.ascontiguousarray(img[:h, :w]), "rgb24")
            ):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
