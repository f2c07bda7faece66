"""Collect -> validate -> load -> replay for one task: the check behind ``make demo`` and the expert sweep."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from sim.collect import CollectConfig, collect
from sim.env import EnvConfig
from sim.replay import ReplayConfig, replay
from vla.data.reader import open_dataset, read_episode_info
from vla.data.validate import validate_dataset


@dataclass
class TaskReport:
    task: str
    expert_success: int
    episodes: int
    replay_success: int
    replayed: int
    lerobot_episodes: int
    steps_per_episode: float
    collect_s: float


def collect_and_replay(
    task: str, episodes: int, out: Path, sheet: Path | None = None, seed: int = 0
) -> TaskReport:
    """Collect ``episodes`` expert episodes into a fresh ``out``, validate, load with lerobot, replay."""
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    k, n, _ = collect(
        CollectConfig(task=task, episodes=episodes, out=str(out), seed=seed, env=EnvConfig(task=task))
    )
    t_collect = time.perf_counter() - t0
    validate_dataset(out)
    loaded = open_dataset(out).num_episodes
    r, m = replay(ReplayConfig(dataset=str(out), sheet=str(sheet) if sheet else None))
    steps = sum(i.length for i in read_episode_info(out)) / max(loaded, 1)
    return TaskReport(task, k, n, r, m, loaded, round(steps, 1), round(t_collect, 1))


def markdown_table(reports: list[TaskReport]) -> str:
    lines = [
        "| task | expert success | replay success | LeRobotDataset episodes | steps/episode "
        "| collect time (s) |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.task} | {r.expert_success}/{r.episodes} | {r.replay_success}/{r.replayed} "
        f"| {r.lerobot_episodes} | {r.steps_per_episode:.0f} | {r.collect_s} |"
        for r in reports
    ]
    return "\n".join(lines)
