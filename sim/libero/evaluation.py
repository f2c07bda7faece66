"""``vla-eval env=libero suite=<name>``: a checkpoint on a LIBERO suite, by the standard protocol, with a
per-task success table (Wilson intervals), a JSON report and videos.

Episode ``i`` is task ``i // episodes``'s initial state ``i % episodes`` (:class:`~sim.libero.robot.
LiberoRobot`), played through :func:`vla.runtime.loop.run_episode` with the checkpoint's deployment
(:func:`vla.runtime.deployment.deploy_checkpoint`: horizon, RTC, upcycling, safety as ``deploy.*`` says)
in parallel workers (:func:`sim.workers.run_episodes`: processes or Ray). The policy's noise is reseeded
per episode from ``seed`` and the index, so results do not depend on ``workers``.

Without a checkpoint the robot holds still through the same stack: a check of the installation (scenes,
initial states, rendering, the success predicate) that needs no model; every task then fails.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from sim.evaluation import check_checkpoint, resolve_deployment, wilson_interval
from sim.libero.operator import OperatorConfig
from sim.libero.robot import LIBERO_PANDA, LiberoRobot
from sim.libero.suite import CONTROL_HZ, INIT_STATES, MAX_STEPS, NOOP, suite_tasks
from sim.workers import RUNNERS, RayConfig, run_episodes
from vla.checkpoint import read_config
from vla.runtime.config import DeployConfig
from vla.runtime.deployment import deploy_checkpoint
from vla.runtime.loop import run_episode
from vla.runtime.stack import build_stack
from vla.runtime.subscribers import VideoRecorder

DEFAULT_IMAGE_SIZE = (256, 256)  # LeRobot's LIBERO datasets


@dataclass
class LiberoEvalConfig:
    """``vla-eval env=libero`` options (every field a ``key=value`` override)."""

    checkpoint: str | None = None  # None (and no deploy.remote): the robot holds still (a set-up check)
    suite: str = "libero_object"  # libero_spatial, libero_object, libero_goal, libero_10, libero_90
    tasks: list[str] | None = None  # task indices or names; None: every task of the suite
    episodes: int = 50  # per task: initial states 0..episodes-1 (the protocol: all 50)
    first_init: int = 0  # the plan's first initial state (the protocol: 0); rollouts start elsewhere
    # rollouts (sim.libero.rollout): episodes in all, interleaved over the tasks from episode number offset
    interleaved: bool = False
    offset: int = 0
    # rollouts: the scripted operator who takes over a stalled policy (sim.libero.operator; off by default)
    operator: OperatorConfig = field(default_factory=lambda: OperatorConfig(enabled=False))
    max_steps: int | None = None  # None: the suite's limit; lower only for smoke runs
    image_size: tuple[int, int] | None = None  # None: the checkpoint's image_size, else 256 x 256
    camera_names: dict[str, str] | None = None  # our camera -> LIBERO's (None: image, image2)
    seed: int = 0  # the policy's noise: episode i reseeds from (seed, i)
    workers: int = 2  # worker processes (0: this process)
    out: str | None = None  # default outputs/eval/<suite>
    videos: int = 1  # the first this many episodes of every task are written as mp4
    progress: bool = True
    device: str = "cpu"
    cameras: list[str] | None = None  # the policy's; default: policy.config.cameras, else both
    imports: list[str] = field(default_factory=lambda: ["policies"])
    cond: int | None = None
    guidance: float | None = None
    num_steps: int | None = None
    deploy: DeployConfig = field(default_factory=DeployConfig)
    runner: str = "process"  # process or ray
    ray: RayConfig = field(default_factory=RayConfig)

    def __post_init__(self) -> None:
        if self.suite not in MAX_STEPS:
            raise ValueError(f"suite={self.suite!r}: use one of {', '.join(MAX_STEPS)}")
        if self.episodes < 1 or (not self.interleaved and self.episodes > INIT_STATES):
            raise ValueError(f"episodes={self.episodes}: per task, 1..{INIT_STATES} (its initial states)")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps={self.max_steps} must be >= 1")
        if not 0 <= self.first_init < INIT_STATES:
            raise ValueError(f"first_init={self.first_init}: an initial state, 0..{INIT_STATES - 1}")
        if self.workers < 0 or self.videos < 0:
            raise ValueError(f"workers={self.workers} and videos={self.videos} must be >= 0")
        if self.runner not in RUNNERS:
            raise ValueError(f"runner={self.runner!r}: use one of {', '.join(RUNNERS)}")
        if self.cond not in (None, 0, 1):
            raise ValueError(f"cond={self.cond} must be 0, 1 or null")
        if self.image_size is not None:
            self.image_size = tuple(int(v) for v in self.image_size)  # type: ignore[assignment]

    @property
    def out_dir(self) -> Path:
        return Path(self.out or f"outputs/eval/{self.suite}")

    @property
    def holds_still(self) -> bool:
        return not self.checkpoint and not self.deploy.remote


@dataclass
class LiberoEpisode:
    index: int
    task: str
    task_index: int
    init_state: int
    success: bool
    length: int
    policy_calls: int
    wall_s: float
    fault: str | None = None
    video: str | None = None
    pid: int = 0


class LiberoWorker:
    """One worker's robot (its tasks' environments) and deployment, reused across its episodes."""

    def __init__(self, cfg: LiberoEvalConfig) -> None:
        self.cfg = cfg
        assert cfg.image_size is not None
        self.robot = LiberoRobot(
            suite_tasks(cfg.suite, cfg.tasks),
            None if cfg.interleaved else cfg.episodes,
            cfg.image_size,
            max_steps=cfg.max_steps,
            camera_names=cfg.camera_names,
            first_init=cfg.first_init,
            offset=cfg.offset,
        )
        self.runner: Any = None
        if cfg.holds_still:
            still = np.asarray([NOOP], dtype=np.float64)
            self.stack = build_stack(cfg.deploy, lambda obs: still, profile=LIBERO_PANDA, chunk_size=1)
        else:
            d = deploy_checkpoint(
                cfg.checkpoint,  # type: ignore[arg-type]
                LIBERO_PANDA,
                cfg.deploy,
                available_cameras=self.robot.cameras,
                cameras=cfg.cameras,
                device=cfg.device,
                cond=cfg.cond,
                guidance=cfg.guidance,
                num_steps=cfg.num_steps,
                imports=cfg.imports,
            )
            self.runner, self.stack = d.runner, d.stack

    def run(self, index: int) -> LiberoEpisode:
        return self.play(index)[0]

    def play(self, index: int, extra: Sequence[Any] = (), teleop: Any = None) -> tuple[LiberoEpisode, Any]:
        """Episode ``index`` with ``extra`` subscribers besides the video and an operator who may take over;
        (its record, the loop's result)."""
        cfg = self.cfg
        task, init = self.robot.episode(index)
        if self.runner is not None:
            self.runner.reseed(int(np.random.SeedSequence([cfg.seed, index, 1]).generate_state(1)[0]))
        video = None
        subscribers: list[Any] = list(extra)
        if index % cfg.episodes < cfg.videos:
            video = cfg.out_dir / "videos" / f"task{task.index:02d}_init{init:02d}.mp4"
            subscribers.append(VideoRecorder(video, self.robot.cameras, CONTROL_HZ))
        r = run_episode(self.robot, self.stack, seed=index, subscribers=subscribers, teleop=teleop)
        record = LiberoEpisode(
            index=index,
            task=task.name,
            task_index=task.index,
            init_state=init,
            success=bool(r.success),
            length=r.steps,
            policy_calls=r.policy_calls,
            wall_s=round(r.wall_s, 3),
            fault=r.fault,
            video=None if video is None else str(video),
            pid=os.getpid(),
        )
        return record, r

    def close(self) -> None:
        self.stack.close()
        self.robot.close()
        if hasattr(self.runner, "close"):
            self.runner.close()


@dataclass
class LiberoResult:
    config: LiberoEvalConfig
    episodes: list[LiberoEpisode]
    wall_s: float
    policy_type: str

    def per_task(self) -> list[dict[str, Any]]:
        rows = []
        for index in sorted({e.task_index for e in self.episodes}):
            mine = [e for e in self.episodes if e.task_index == index]
            k = sum(e.success for e in mine)
            rows.append(_row(f"{index}: {mine[0].task}", k, mine))
        return rows

    def summary(self) -> dict[str, Any]:
        k = sum(e.success for e in self.episodes)
        return {
            "suite": self.config.suite,
            "checkpoint": self.config.checkpoint,
            "policy_type": self.policy_type,
            "episodes_per_task": self.config.episodes,
            "max_steps": self.config.max_steps or MAX_STEPS[self.config.suite],
            "image_size": list(self.config.image_size or DEFAULT_IMAGE_SIZE),
            "all": _row("all", k, self.episodes),
            "tasks": self.per_task(),
            "wall_s": round(self.wall_s, 2),
            "mujoco_gl": os.environ.get("MUJOCO_GL"),
        }

    def table(self) -> str:
        lines = [
            f"{self.config.suite} ({self.policy_type}; {self.config.episodes} episodes per task)",
            "| task | success | 95% CI (Wilson) | mean length |",
            "|---|---|---|---|",
        ]
        for r in [*self.per_task(), self.summary()["all"]]:
            lo, hi = r["ci95"]
            lines.append(
                f"| {r['name']} | {r['successes']}/{r['episodes']} ({100 * r['success_rate']:.1f}%) "
                f"| [{lo:.3f}, {hi:.3f}] | {r['mean_length']:.1f} |"
            )
        return "\n".join(lines)

    @property
    def json_path(self) -> Path:
        return self.config.out_dir / "eval.json"


def _row(name: str, k: int, episodes: list[LiberoEpisode]) -> dict[str, Any]:
    n = len(episodes)
    return {
        "name": name,
        "episodes": n,
        "successes": k,
        "success_rate": k / n,
        "ci95": list(wilson_interval(k, n)),
        "mean_length": float(np.mean([e.length for e in episodes])),
    }


def prepare[C: LiberoEvalConfig](cfg: C) -> tuple[C, str]:
    """``cfg`` checked in this process before any worker starts (the checkpoint, or the server of
    ``deploy.remote``; the tasks), its unset deployment values and image size taken from the checkpoint;
    and the policy's type."""
    policy_type = "holds still"
    if not cfg.holds_still:
        cfg, policy_type = check_checkpoint(cfg)  # type: ignore[type-var]
        cfg, settings = resolve_deployment(cfg)  # type: ignore[type-var]
        if cfg.progress:
            print(settings.describe(), flush=True)
    if cfg.image_size is None:
        own = read_config(cfg.checkpoint).get("image_size") if cfg.checkpoint else None
        cfg = replace(cfg, image_size=tuple(own) if own else DEFAULT_IMAGE_SIZE)
    suite_tasks(cfg.suite, cfg.tasks)  # refuses a bad task by name
    return cfg, policy_type


def evaluate_libero(cfg: LiberoEvalConfig) -> LiberoResult:
    """Every planned episode of ``cfg`` (see the module docstring); writes ``<out>/eval.json`` and videos."""
    cfg, policy_type = prepare(cfg)
    cfg = replace(cfg, out=str(cfg.out_dir.resolve()))
    n = len(suite_tasks(cfg.suite, cfg.tasks)) * cfg.episodes
    t0 = time.perf_counter()
    records: list[LiberoEpisode] = []
    bar = tqdm(total=n, desc=f"eval {cfg.suite}", unit="ep", disable=not cfg.progress)
    try:
        for rec in run_episodes(LiberoWorker, cfg, n, min(cfg.workers, n), cfg.runner, cfg.ray):
            records.append(rec)
            bar.update(1)
            bar.set_postfix(success=f"{sum(r.success for r in records)}/{len(records)}")
    finally:
        bar.close()
    records.sort(key=lambda r: r.index)
    result = LiberoResult(cfg, records, time.perf_counter() - t0, policy_type)
    result.json_path.parent.mkdir(parents=True, exist_ok=True)
    report = {"config": asdict(cfg), "summary": result.summary(), "episodes": [asdict(e) for e in records]}
    result.json_path.write_text(json.dumps(report, indent=2))
    return result
