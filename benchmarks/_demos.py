"""Expert demos shared by the benchmarks: the same DART-noised demos (seed 0) for SFT and post-training."""

from __future__ import annotations

from pathlib import Path

from sim.collect import CollectConfig, collect
from sim.env import EnvConfig
from sim.experts import ExpertNoise
from vla.data.reader import read_episode_info
from vla.data.sidecar import read_sidecar

# DART noise of the demos per task (sim.experts.ExpertNoise): the env runs the expert's command plus
# N(0, std^2) rad per arm joint, the dataset records the clean command. Reach: 54% -> 90% (docs/results.md).
DART = {
    "reach": ExpertNoise(execute_std=0.08),
    "pick_place": ExpertNoise(execute_std=0.08, contact_scale=0.25),
}


def ensure_demos(
    task: str, episodes: int, root: Path, noise: ExpertNoise, *, seed: int = 0, keep_failures: bool = False
) -> int:
    """At least ``episodes`` demos in ``root`` (seeds ``seed``, ``seed + 1``, ...; a longer set starts with
    a shorter one). Expert demos drop failures (a noise-knocked grasp leaves a demo whose later labels
    are wrong); a deliberately sloppy demonstrator keeps them (``keep_failures``). Returns how many
    episodes ``root`` holds."""
    have = len(read_sidecar(root))  # committed episodes; none if the folder is new
    if have >= episodes:
        print(f"demos: {root} has {have} episodes")
        return have
    k, n, _ = collect(
        CollectConfig(
            task=task,
            episodes=episodes,
            out=str(root),
            seed=seed,
            env=EnvConfig(task=task),
            noise=noise,
            keep_failures=keep_failures,
        )
    )
    print(f"demos: demonstrator success {k}/{n} -> {root}")
    return len(read_episode_info(root))
