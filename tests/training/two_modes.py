"""A toy task with two successful modes of different quality, for learning tests of the credit methods.

A point moves along a line from p ~ U(0, 0.1) to the goal p >= 1; the action (all 8 dims) is its velocity.
Demonstrations come in three kinds, all recorded as policy episodes (the executed segments HABC labels):

- ``fast`` successes: v = +0.2 per step (~5 steps),
- ``slow`` successes: v = +0.07 per step (~14 steps), twice as many as the fast ones,
- failures: v = -0.05 for 14 steps, away from the goal.

Filtering by success keeps fast and slow alike (1/3 fast); a method that credits time to success should
prefer the fast mode. ``observation.state[0]`` is p; the images are featureless grey.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
from toy_episodes import toy_frame

from policies.flow_matching import debug_config
from training.config import TrainConfig
from training.data import DataConfig
from training.loop import Trainer
from vla.data import EpisodeSpec, EpisodeWriter

SPEC = EpisodeSpec(cameras={"agentview": (32, 32), "wrist": (32, 32)}, state_dim=8, action_dim=8, fps=10)
FAST, SLOW, AWAY = 0.2, 0.07, -0.05
T_MAX = 16


def write_two_modes(root: Path, fast: int = 10, slow: int = 20, fail: int = 10, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    kinds = ["fast"] * fast + ["slow"] * slow + ["fail"] * fail
    rng.shuffle(kinds)
    with EpisodeWriter(root, SPEC, durable=False) as w:
        for kind in kinds:
            v = {"fast": FAST, "slow": SLOW, "fail": AWAY}[kind]
            p = float(rng.uniform(0.0, 0.1))
            steps = 0
            while True:
                state = rng.normal(0, 0.01, 8).astype(np.float32)
                state[0] = p
                action = np.full(8, v, np.float32) + rng.normal(0, 0.005, 8).astype(np.float32)
                img = np.full((32, 32, 3), 128, np.uint8)
                p += v
                steps += 1
                done = p >= 1.0 or steps >= 14
                w.add_frame(toy_frame(img, state, action, False, float(p >= 1.0), done, "reach the goal"))
                if done:
                    break
            w.end_episode(success=kind != "fail", source="policy", extra={"kind": kind})
    return root


def fast_fraction(
    policy, positions=(0.2, 0.4, 0.6), samples: int = 64, seed: int = 0, threshold: float = (FAST + SLOW) / 2
) -> float:
    """Share of the policy's first actions above ``threshold`` (nearer the fast velocity than the slow one,
    by default), over states p."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    policy.eval()
    cfg = policy.config  # a RECAP checkpoint samples conditioned on I = 1 (as PolicyRunner does)
    cond = None if cfg.inference_cond is None else torch.full((samples,), cfg.inference_cond)
    hits = total = 0
    for p in positions:
        state = torch.zeros(samples, 8)
        state[:, 0] = p
        grey = torch.full((samples, 3, 32, 32), 128 / 255.0)
        obs = {
            "observation.state": state,
            "observation.images.agentview": grey,
            "observation.images.wrist": grey,
            "task": ["reach the goal"] * samples,
        }
        with torch.no_grad():
            chunk = policy.sample_chunk(obs, cond=cond, guidance=cfg.inference_guidance, generator=gen)
            first = chunk[:, 0].mean(-1)  # [S]
        hits += int((first > threshold).sum())
        total += samples
    return hits / total


def train_toy(root, out, algo: dict, *, steps: int, only_success: bool = False, init_from=None):
    """Train the debug policy (chunk 4) on a toy dataset through the one loop; the checkpoint folder."""
    cfg = TrainConfig(
        policy=asdict(debug_config(chunk_size=4)),
        algo=algo,
        data=DataConfig(roots=[str(root)], random_shift=0, only_success=only_success),
        out=str(out),
        init_from=None if init_from is None else str(init_from),
        steps=steps,
        batch_size=32,
        threads=1,
        progress=False,
        save_every=steps,
        log_every=steps,
    )
    return Trainer(cfg).run()
