"""Closed-loop evaluation of a policy checkpoint on a MuJoCo task: parallel episodes -> success rate with a
Wilson interval, a JSON report and a few videos.

Episode i resets the env with seed ``seed + i`` and reseeds the policy's noise from it, in whichever
worker picks it up, so results do not depend on ``workers``. Each worker holds one
:class:`~sim.deploy.SimDeployment` and plays its episodes through :func:`vla.runtime.loop.run_episode`,
the control loop that also runs on hardware; this module only adds what evaluation needs (records,
statistics, the report, videos and the pooled self-compensation model).

The deployment values left unset (``deploy.horizon``, ``cond``, ``guidance``, ``num_steps``) take
the checkpoint's defaults (:mod:`vla.runtime.defaults`), resolved once in the parent: the report's
``summary.deploy`` and a printed ``deploy: ...`` line say what ran and where each value came from.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from sim.deploy import SimDeployConfig, SimDeployment, match_policy_images
from sim.workers import run_episodes
from vla import checks
from vla.errors import InputError
from vla.runtime.compensation import SelfCompensator
from vla.runtime.defaults import DeploySettings, resolve
from vla.runtime.remote import served_checkpoint
from vla.runtime.subscribers import TrajectoryMetrics, VideoRecorder

REPORT_FILE = "eval.json"
COMPENSATOR_FILE = "compensator.json"
COMPENSATION_DIR = "compensation"
VIDEO_DIR = "videos"


@dataclass
class EvalConfig(SimDeployConfig):
    """``vla-eval`` options: a deployed checkpoint (:class:`~sim.deploy.SimDeployConfig`) plus how many
    episodes, where the report goes, and videos."""

    episodes: int = 10
    workers: int = 2  # worker processes; 0 runs the episodes in this process (debugging)
    out: str | None = None  # output folder; default outputs/eval/<task>
    videos: int = 3  # the first this many episodes are written as mp4 (cameras side by side)
    progress: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.episodes < 1:
            raise ValueError(f"episodes={self.episodes} must be >= 1")
        if self.workers < 0:
            raise ValueError(f"workers={self.workers} must be >= 0 (0: run in this process)")
        if self.videos < 0:
            raise ValueError(f"videos={self.videos} must be >= 0")
        if self.videos and not self.env.render:
            raise ValueError("videos need rendered observations: set env.render=true or videos=0")

    @property
    def out_dir(self) -> Path:
        return Path(self.out or f"outputs/eval/{self.task}")


@dataclass
class EpisodeRecord:
    index: int
    seed: int
    success: bool
    length: int  # control steps executed
    policy_calls: int
    instruction: str
    wall_s: float
    video: str | None = None
    horizon: int = 0
    chunk_size: int = 0
    pid: int = 0
    mujoco_gl: str | None = None  # the backend the worker rendered with (inherited from the parent)
    jerk: float = 0.0  # mean squared jerk of the executed arm joint trajectory (rad^2 / s^6)
    mean_horizon: float = 0.0  # mean executed horizon per chunk with upcycling (0: not used)
    fault: str | None = None  # the safety layer's fault (the arm held from then on)
    interpolated: int = 0  # periods in which the safety layer shaped a jump within the limits


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (z = 1.96: 95 %).

    With p = k / n::

        center = (p + z² / 2n) / (1 + z² / n)
        half   = z / (1 + z² / n) * sqrt(p (1 - p) / n + z² / 4n²)
        (lo, hi) = (center - half, center + half)

    Unlike the normal approximation it stays inside [0, 1] and is not degenerate at k = 0 or k = n
    (e.g. 0/4 -> (0, 0.49), 8/10 -> (0.49, 0.94)).
    """
    if n < 1:
        raise ValueError(f"n={n} must be >= 1")
    if not 0 <= k <= n:
        raise ValueError(f"k={k} must be in [0, n={n}]")
    p, z2 = k / n, z * z
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    lo = 0.0 if k == 0 else max(0.0, center - half)
    hi = 1.0 if k == n else min(1.0, center + half)
    return lo, hi


def outcome_metrics(episodes: Sequence[Any]) -> dict[str, Any]:
    """What an env runner reports of scored episodes (each with ``success``, ``length``, ``policy_calls``):
    success with its Wilson interval, mean length, policy calls, time to success (the successful episodes'
    length: each ends at its success) and successes per 1000 control steps."""
    n, k = len(episodes), sum(bool(e.success) for e in episodes)
    lo, hi = wilson_interval(k, n)
    ok = [e.length for e in episodes if e.success]
    steps = sum(e.length for e in episodes)
    return {
        "success_rate": k / n,
        "success_ci_low": lo,
        "success_ci_high": hi,
        "mean_length": float(np.mean([e.length for e in episodes])),
        "calls_per_episode": float(np.mean([e.policy_calls for e in episodes])),
        "success_length_mean": float(np.mean(ok)) if ok else float("nan"),
        "successes_per_1000_steps": 1000 * k / max(1, steps),
    }


@dataclass
class EvalResult:
    config: EvalConfig
    episodes: list[EpisodeRecord]  # sorted by index
    wall_s: float
    policy_type: str
    workers: int  # processes used (0: in-process)
    settings: DeploySettings | None = None  # the deployment values and where each came from

    @property
    def holds(self) -> int:
        """Episodes in which the safety layer faulted (the arm held from then on)."""
        return sum(e.fault is not None for e in self.episodes)

    @property
    def successes(self) -> int:
        return sum(e.success for e in self.episodes)

    @property
    def n(self) -> int:
        return len(self.episodes)

    @property
    def success_rate(self) -> float:
        return self.successes / self.n

    @property
    def ci95(self) -> tuple[float, float]:
        return wilson_interval(self.successes, self.n)

    @property
    def mean_length(self) -> float:
        return float(np.mean([e.length for e in self.episodes]))

    @property
    def calls_per_episode(self) -> float:
        return float(np.mean([e.policy_calls for e in self.episodes]))

    @property
    def json_path(self) -> Path:
        return self.config.out_dir / REPORT_FILE

    @property
    def videos(self) -> list[Path]:
        return [Path(e.video) for e in self.episodes if e.video]

    def summary(self) -> dict[str, Any]:
        first = self.episodes[0]
        return {
            "task": self.config.task,
            "checkpoint": str(self.config.checkpoint),
            "policy_type": self.policy_type,
            "episodes": self.n,
            "successes": self.successes,
            "success_rate": self.success_rate,
            "ci95": list(self.ci95),
            "mean_length": self.mean_length,
            "policy_calls_per_episode": self.calls_per_episode,
            "mean_jerk": float(np.mean([e.jerk for e in self.episodes])),
            "deploy": None if self.settings is None else self.settings.to_json(),
            "safety": self.config.deploy.safety.mode,
            "safety_holds": self.holds,
            "faults": sorted({e.fault for e in self.episodes if e.fault}),
            "horizon": first.horizon,
            "chunk_size": first.chunk_size,
            "workers": self.workers,
            "wall_s": round(self.wall_s, 3),
            "steps_per_s": round(sum(e.length for e in self.episodes) / self.wall_s, 2),
            "mujoco_gl": first.mujoco_gl,
            "videos": [str(v) for v in self.videos],
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "config": asdict(self.config),
            "summary": self.summary(),
            "episodes": [asdict(e) for e in self.episodes],
        }

    def table(self) -> str:
        lo, hi = self.ci95
        first = self.episodes[0]
        return "\n".join(
            [
                "| task | policy | episodes | success | 95% CI (Wilson) | mean length | calls/episode "
                "| h / H | wall (s) |",
                "|---|---|---|---|---|---|---|---|---|",
                f"| {self.config.task} | {self.policy_type} | {self.n} | {self.successes}/{self.n} "
                f"({100 * self.success_rate:.1f}%) | [{lo:.3f}, {hi:.3f}] | {self.mean_length:.1f} "
                f"| {self.calls_per_episode:.1f} | {first.horizon} / {first.chunk_size} "
                f"| {self.wall_s:.1f} |",
            ]
        )


# ---- checks in the parent, before any worker starts ---------------------------------------------------
def check_checkpoint[C: SimDeployConfig](cfg: C) -> tuple[C, str]:
    """Refuse a bad checkpoint before any worker starts (:func:`vla.checks.check_checkpoint`: one line
    naming the file and what is wrong); returns ``cfg`` and the policy type. With ``deploy.remote``: the
    server is asked instead, and an unset ``checkpoint`` becomes a folder of the served checkpoint's
    settings (:func:`vla.runtime.remote.served_checkpoint`)."""
    if cfg.deploy.remote:
        try:
            folder, info = served_checkpoint(
                cfg.deploy.remote, cfg.checkpoint, timeout_s=cfg.deploy.remote_timeout_s
            )
        except ConnectionError as exc:
            raise InputError(f"deploy.remote: {exc}") from None
        return replace(cfg, checkpoint=folder), str(info["type"])
    assert cfg.checkpoint is not None
    return cfg, checks.check_checkpoint(cfg.checkpoint, imports=cfg.imports).type


def resolve_deployment[C: SimDeployConfig](cfg: C) -> tuple[C, DeploySettings]:
    """``cfg`` with its unset deployment values taken from the checkpoint's defaults (horizon, cond,
    guidance, num_steps; :func:`vla.runtime.defaults.resolve`), so every worker runs the same values; and
    the settings, which say where each came from."""
    settings = resolve(
        cfg.checkpoint, cfg.deploy, cond=cfg.cond, guidance=cfg.guidance, num_steps=cfg.num_steps
    )
    resolved = replace(
        cfg,
        deploy=settings.apply(cfg.deploy),
        cond=settings.cond,
        guidance=settings.guidance,
        num_steps=settings.num_steps,
    )
    return resolved, settings


# ---- one worker: a deployment reused across its episodes -------------------------------------------------
class EvalWorker:
    """Plays evaluation episodes on one :class:`~sim.deploy.SimDeployment`."""

    def __init__(self, cfg: EvalConfig) -> None:
        self.cfg = cfg
        self.deployment = SimDeployment(cfg)

    def run(self, index: int) -> EpisodeRecord:
        """Episode ``index``: env seed ``seed + index``; written as a video if ``index < videos``."""
        cfg, d = self.cfg, self.deployment
        metrics = TrajectoryMetrics()
        subscribers: list[Any] = [metrics]
        video = None
        if index < cfg.videos:
            video = cfg.out_dir / VIDEO_DIR / f"episode_{index:03d}.mp4"
            subscribers.append(VideoRecorder(video, cfg.env.cameras, round(cfg.env.control_hz)))
        r = d.run(index, subscribers)
        if d.stack.compensator is not None:  # pooled by the parent into <out>/compensator.json
            mine = cfg.out_dir / COMPENSATION_DIR / f"worker_{os.getpid()}.json"
            d.stack.compensator.save(mine, buffer=True)
        safety = d.stack.safety
        return EpisodeRecord(
            index=index,
            seed=cfg.seed + index,
            success=bool(r.success),
            length=r.steps,
            policy_calls=r.policy_calls,
            instruction=r.instruction,
            wall_s=round(r.wall_s, 3),
            video=None if video is None else str(video),
            horizon=d.stack.executor.horizon,
            chunk_size=d.stack.chunk_size,
            jerk=metrics.jerk(d.robot.profile.dt),
            mean_horizon=float(np.mean(r.horizons)) if r.horizons else 0.0,
            fault=r.fault,
            interpolated=0 if safety is None else safety.interpolated,
            pid=os.getpid(),
            mujoco_gl=os.environ.get("MUJOCO_GL"),
        )

    def close(self) -> None:
        self.deployment.close()


def pool_compensators(out: Path) -> Path:
    """Merge the workers' saved compensators into ``<out>/compensator.json`` (+ its buffer)."""
    parts = sorted((out / COMPENSATION_DIR).glob("worker_*.json"))
    path = SelfCompensator.merged(parts).save(out / COMPENSATOR_FILE, buffer=True)
    shutil.rmtree(out / COMPENSATION_DIR)
    return path


def evaluate(cfg: EvalConfig) -> EvalResult:
    """Run ``cfg.episodes`` episodes of ``cfg.task`` with the checkpoint's policy.

    Writes ``<out>/eval.json`` (config, summary, per-episode records) and ``<out>/videos/episode_<i>.mp4``
    for the first ``cfg.videos`` episodes. Prints the deployment values and their sources (one line)
    when ``cfg.progress``.
    """
    cfg, policy_type = check_checkpoint(cfg)
    cfg, settings = resolve_deployment(cfg)
    cfg, size_note = match_policy_images(replace(cfg, out=str(cfg.out_dir.resolve())))  # workers write there
    if cfg.progress:
        print("\n".join(filter(None, [settings.describe(), size_note])), flush=True)
    out = cfg.out_dir
    (out / VIDEO_DIR).mkdir(parents=True, exist_ok=True)
    for old in [*(out / VIDEO_DIR).glob("episode_*.mp4"), *(out / COMPENSATION_DIR).glob("worker_*")]:
        old.unlink()  # from an earlier run into the same folder
    workers = min(cfg.workers, cfg.episodes)
    t0 = time.perf_counter()
    records: list[EpisodeRecord] = []
    bar = tqdm(total=cfg.episodes, desc=f"eval {cfg.task}", unit="ep", disable=not cfg.progress)
    try:
        for rec in run_episodes(EvalWorker, cfg, cfg.episodes, workers, cfg.runner, cfg.ray):
            records.append(rec)
            bar.update(1)
            bar.set_postfix(success=f"{sum(r.success for r in records)}/{len(records)}")
    finally:
        bar.close()
    records.sort(key=lambda r: r.index)
    if cfg.deploy.compensation.enabled:
        pool_compensators(out)
    result = EvalResult(cfg, records, time.perf_counter() - t0, policy_type, workers, settings)
    result.json_path.write_text(json.dumps(result.to_json(), indent=2))
    return result
