"""Camera images as ROS carries them (``sensor_msgs/Image`` bytes, ``CompressedImage`` jpeg/png) -> uint8
RGB arrays, without cv_bridge or rclpy. Shared by the ROS 2 node (live topics) and ``vla-bag2dataset``
(recorded bags)."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image as PILImage

# encoding -> (channels, index of R, G, B in a pixel)
RAW_ENCODINGS: dict[str, tuple[int, tuple[int, int, int]]] = {
    "rgb8": (3, (0, 1, 2)),
    "bgr8": (3, (2, 1, 0)),
    "rgba8": (4, (0, 1, 2)),
    "bgra8": (4, (2, 1, 0)),
    "mono8": (1, (0, 0, 0)),
}


def resize(image: np.ndarray, size: tuple[int, int] | None) -> np.ndarray:
    """``image`` uint8 [H, W, 3] at ``size`` = (H, W) (bilinear; unchanged when None or equal)."""
    if size is None or tuple(image.shape[:2]) == tuple(size):
        return image
    pil = PILImage.fromarray(image).resize((int(size[1]), int(size[0])), PILImage.BILINEAR)
    return np.asarray(pil, dtype=np.uint8)


def decode_raw(
    data: bytes, height: int, width: int, step: int, encoding: str, size: tuple[int, int] | None = None
) -> np.ndarray:
    """A raw ``sensor_msgs/Image`` as uint8 [H, W, 3] RGB.

    Raises:
        ValueError: An encoding other than rgb8/bgr8/rgba8/bgra8/mono8, or data shorter than height * step.
    """
    if encoding not in RAW_ENCODINGS:
        raise ValueError(f"image encoding {encoding!r} is not supported; use one of {sorted(RAW_ENCODINGS)}")
    channels, order = RAW_ENCODINGS[encoding]
    if step < width * channels or len(data) < height * step:
        raise ValueError(
            f"image {width}x{height} {encoding}: step {step} and {len(data)} bytes do not hold the pixels"
        )
    rows = np.frombuffer(data, dtype=np.uint8, count=height * step).reshape(height, step)
    pixels = rows[:, : width * channels].reshape(height, width, channels)
    return resize(np.ascontiguousarray(pixels[..., list(order)]), size)


def decode_compressed(data: bytes, size: tuple[int, int] | None = None) -> np.ndarray:
    """A ``sensor_msgs/CompressedImage`` (jpeg or png) as uint8 [H, W, 3] RGB.

    Raises:
        ValueError: The bytes are not an image PIL can read.
    """
    try:
        with PILImage.open(io.BytesIO(data)) as img:
            return resize(np.asarray(img.convert("RGB"), dtype=np.uint8), size)
    except (OSError, SyntaxError) as exc:
        raise ValueError(f"compressed image: cannot decode {len(data)} bytes ({exc})") from exc


def encode_compressed(image: np.ndarray, fmt: str = "png") -> bytes:
    """uint8 [H, W, 3] -> png/jpeg bytes (a CompressedImage's data)."""
    buf = io.BytesIO()
    PILImage.fromarray(np.asarray(image, dtype=np.uint8)).save(buf, format=fmt.upper().replace("JPG", "JPEG"))
    return buf.getvalue()
