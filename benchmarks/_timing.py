"""Shared helpers for the policy benchmarks: deliberate thread count, warm-up, median timings, results."""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def median_seconds(fn: Callable[[], object], repeats: int = 20, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def write_result(name: str, record: dict) -> Path:
    record = {
        **record,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def fake_obs(cameras: list[str], image_size: list[int], state_dim: int, b: int, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    obs = {f"observation.images.{c}": torch.rand(b, 3, *image_size, generator=g) for c in cameras}
    obs["observation.state"] = torch.randn(b, state_dim, generator=g)
    obs["task"] = ["put the red cube in the blue bin"] * b
    return obs


def fake_batch(
    cameras: list[str], image_size: list[int], state_dim: int, action_dim: int, chunk: int, b: int
) -> dict:
    batch = fake_obs(cameras, image_size, state_dim, b)
    batch["action"] = torch.randn(b, chunk, action_dim)
    batch["action_is_pad"] = torch.zeros(b, chunk, dtype=torch.bool)
    return batch
