"""Camera videos: writing frames as an mp4 (PyAV, which ships with lerobot), and probing that a dataset's
video files decode (:class:`FrameProbe`, with the decoder lerobot's reader uses)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

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


class VideoDecodeError(RuntimeError):
    """A video file cannot be opened, or a frame it should hold cannot be decoded; one line, no C++ source
    locations."""


_CPP_PREFIX = re.compile(r"^(?:\w+, )?\S+\.(?:cpp|h):\d+, ")


def decode_error_line(exc: BaseException, path: str | Path) -> str:
    """A decoder's error as one short line: its first line, without C++ source locations or the path."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = _CPP_PREFIX.sub("", lines[0]) if lines else type(exc).__name__
    return text.replace(f": {path} ", ": ").replace(f" {path}", "")


def _torchcodec() -> Any | None:
    """torchcodec's ``VideoDecoder`` where it loads (lerobot's default backend), else None (PyAV)."""
    try:
        from torchcodec.decoders import VideoDecoder
    except (ImportError, OSError, RuntimeError):
        return None
    return VideoDecoder


class FrameProbe:
    """Decodes single frames of one video file, as lerobot's reader does when training loads a dataset:
    torchcodec in ``approximate`` seek mode, frame index ``round(t * average_fps)``, the frame's timestamp
    within ``tolerance_s`` of ``t``; PyAV where torchcodec cannot load. A corrupt file fails to open or to
    decode here instead of mid-way through loading.

    Raises:
        VideoDecodeError: On opening (container unreadable) and in :meth:`decode`.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._container: Any = None
        self._decoder: Any = None
        decoder_cls = _torchcodec()
        try:
            if decoder_cls is not None:
                self._decoder = decoder_cls(str(self.path), seek_mode="approximate")
                self._fps = float(self._decoder.metadata.average_fps)
            else:
                import av

                self._container = av.open(str(self.path))
                self._stream = self._container.streams.video[0]
        except Exception as exc:  # native decoders raise many types (RuntimeError, av.error.*, IndexError)
            raise VideoDecodeError(decode_error_line(exc, self.path)) from exc

    def decode(self, seconds: Sequence[float], tolerance_s: float = 1e-4) -> None:
        """Decodes the frames shown at ``seconds`` (from the file's start)."""
        try:
            found = (
                self._decode_torchcodec(seconds) if self._decoder is not None else self._decode_av(seconds)
            )
        except VideoDecodeError:
            raise
        except Exception as exc:  # as in __init__
            raise VideoDecodeError(decode_error_line(exc, self.path)) from exc
        for t, pts in zip(seconds, found, strict=True):
            if pts is None or abs(pts - t) >= tolerance_s:
                nearest = "none" if pts is None else f"{pts:.4f} s"
                raise VideoDecodeError(f"no frame at {t:.4f} s (nearest: {nearest}); the video is shorter")

    def _decode_torchcodec(self, seconds: Sequence[float]) -> list[float | None]:
        frames = self._decoder.get_frames_at(indices=[round(t * self._fps) for t in seconds])
        return [float(p) for p in frames.pts_seconds]

    def _decode_av(self, seconds: Sequence[float]) -> list[float | None]:
        found: list[float | None] = []
        for t in seconds:
            self._container.seek(int(t / self._stream.time_base), stream=self._stream, backward=True)
            pts = None
            for frame in self._container.decode(self._stream):
                pts = float(frame.time)
                if pts >= t - 1e-6:
                    break
            found.append(pts)
        return found

    def close(self) -> None:
        if self._container is not None:
            self._container.close()
        self._decoder = self._container = None

    def __enter__(self) -> FrameProbe:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
