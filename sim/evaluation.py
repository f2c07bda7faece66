"""Closed-loop evaluation of a policy checkpoint on a MuJoCo task: parallel episodes -> success rate with a
Wilson interval, a JSON report and a few videos.

Episode i resets the env with seed ``seed + i`` and reseeds the policy's noise from it, in whichever
worker picks it up, so results do not depend on ``workers``. Workers are spawned, not forked (GL contexts
and torch thread pools do not survive fork); they inherit the ``MUJOCO_GL`` that ``import sim`` chose
through the environment. The policy runs through ``vla.runtime`` -- the code that runs on hardware.
"""

from __future__ import annotations

import importlib
import json
import math
import multiprocessing as mp
import os
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from omegaconf import MISSING
from tqdm import tqdm

from hardware.profiles import PROFILES
from sim.env import EnvConfig, TabletopEnv
from sim.replay import write_video
from sim.robostress import StressConfig, apply_stress
from vla.checkpoint import MODEL_FILE, read_config
from vla.policy import POLICIES, load_policy
from vla.runtime import ChunkExecutor, PolicyRunner
from vla.runtime.async_executor import AsyncChunkExecutor
from vla.runtime.compensation import CompensationConfig, SelfCompensator
from vla.runtime.safety import SafetyConfig, SafetyLayer
from vla.runtime.upcycling import UPCYCLING_FILE, UpcyclingConfig, tau_from_calibration, upcycled_horizon

REPORT_FILE = "eval.json"
COMPENSATOR_FILE = "compensator.json"
COMPENSATION_DIR = "compensation"
VIDEO_DIR = "videos"


@dataclass
class EvalConfig:
    """``vla-eval`` options."""

    checkpoint: str = MISSING  # a checkpoint folder (config.yaml naming the policy type, model.safetensors)
    task: str = "reach"
    episodes: int = 10
    workers: int = 2  # worker processes; 0 runs the episodes in this process (debugging)
    seed: int = 0  # episode i uses seed + i
    # h, actions executed per chunk; None: the whole chunk (1 with temporal_ensemble)
    horizon: int | None = None
    temporal_ensemble: float | None = None  # ACT weight m: sample every step, average overlapping chunks
    guidance: float | None = None  # classifier-free guidance scale (None = none)
    num_steps: int | None = None  # sampler integration steps (None = the policy's default)
    cond: int | None = None  # advantage indicator 0/1 for conditioned policies (None = unconditioned)
    out: str | None = None  # output folder; default outputs/eval/<task>
    videos: int = 3  # the first this many episodes are written as mp4 (cameras side by side)
    device: str = "cpu"
    cameras: list[str] | None = None  # the policy's; default: policy.config.cameras, else the env's
    imports: list[str] = field(default_factory=lambda: ["policies"])  # modules that register policies
    env: EnvConfig = field(default_factory=EnvConfig)
    progress: bool = True
    # RoboStress execution errors (sim/robostress): a scenario name, its severity in [0, 1] and seed
    stress: str | None = None
    stress_severity: float = 0.5
    stress_seed: int = 0
    # online self-compensation of the arm commands (vla/runtime/compensation.py), learning per worker; the
    # workers' models are pooled into <out>/compensator.json at the end. ``compensator``: a saved one
    # (e.g. an earlier run's <out>/compensator.json) to start from, compensated from the first step
    compensation: bool = False
    compensator: str | None = None
    compensation_trust_region: float = 0.1  # |c - a| <= this per joint (rad): how far it may correct
    # deployment features of vla.runtime: execution-horizon upcycling (thresholds from the checkpoint's
    # upcycling.json), asynchronous inference with a simulated delay of d control steps, real-time chunking
    upcycling: bool = False
    upcycling_quantile: float | None = None  # tau at this demo quantile (None: the calibrated default)
    upcycling_max: int | None = None  # upper bound on the upcycled horizon h*
    upcycling_replan_tolerance: float | None = None  # replan gate: D above which a chunk runs h0 only
    async_delay: int | None = None
    rtc: bool = False
    # the safety layer with the robot profile's limits: None (off), "hold" (any violation holds the arm
    # for the rest of the episode) or "clamp" (rate limits scale the step back; other faults hold)
    safety: str | None = None
    robot: str = "panda"

    def __post_init__(self) -> None:
        StressConfig(self.stress, self.stress_severity, self.stress_seed)  # validates
        if self.compensator is not None and not self.compensation:
            raise ValueError(f"compensator={self.compensator!r} needs compensation=true")
        if self.compensator is not None and not Path(self.compensator).is_file():
            raise FileNotFoundError(f"compensator={self.compensator!r}: no such file")
        if self.safety not in (None, "hold", "clamp"):
            raise ValueError(f"safety={self.safety!r}: use null, 'hold' or 'clamp'")
        if not self.checkpoint or self.checkpoint == MISSING:
            raise ValueError("checkpoint=<folder> is required")
        if self.episodes < 1:
            raise ValueError(f"episodes={self.episodes} must be >= 1")
        if self.workers < 0:
            raise ValueError(f"workers={self.workers} must be >= 0 (0: run in this process)")
        if self.videos < 0:
            raise ValueError(f"videos={self.videos} must be >= 0")
        if self.horizon is not None and self.horizon < 1:
            raise ValueError(f"horizon={self.horizon} must be >= 1")
        if self.temporal_ensemble is not None and self.horizon not in (None, 1):
            raise ValueError(
                f"temporal_ensemble samples a chunk every step: horizon={self.horizon} must be 1"
            )
        if self.cond not in (None, 0, 1):
            raise ValueError(f"cond={self.cond} must be 0, 1 or null")
        self.env = EnvConfig(**{**vars(self.env), "task": self.task})  # validates the task name
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


def mean_squared_jerk(q: np.ndarray, dt: float) -> float:
    """mean ||d^3 q / dt^3||^2 over an executed joint trajectory [T, J] (0 when T < 4)."""
    if len(q) < 4:
        return 0.0
    jerk = np.diff(q, n=3, axis=0) / dt**3
    return float(np.mean(np.sum(jerk**2, axis=1)))


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


@dataclass
class EvalResult:
    config: EvalConfig
    episodes: list[EpisodeRecord]  # sorted by index
    wall_s: float
    policy_type: str
    workers: int  # processes used (0: in-process)

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
def import_modules(names: list[str]) -> None:
    """Import the modules that register policies (``policies``, or a test's own module)."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ImportError(f"imports: cannot import {name!r} ({exc})") from exc


def check_checkpoint(cfg: EvalConfig) -> str:
    """Fail early with a clear message on a bad checkpoint folder; returns the policy type."""
    path = Path(cfg.checkpoint)
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint folder {path} does not exist")
    try:
        meta = read_config(path)
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: config.yaml is not valid YAML ({exc})") from exc
    if not isinstance(meta, dict) or "type" not in meta:
        raise ValueError(f"{path}/config.yaml: no 'type' field naming the policy: not a policy checkpoint")
    if not (path / MODEL_FILE).is_file():
        raise FileNotFoundError(f"{path / MODEL_FILE} not found: incomplete checkpoint folder")
    import_modules(cfg.imports)
    POLICIES.get(meta["type"])  # raises and lists the registered policies
    return str(meta["type"])


def match_policy_images(cfg):
    """Render at the image size the checkpoint's policy was trained on (``image_size`` in its config)."""
    size = read_config(cfg.checkpoint).get("image_size")
    if size is not None and tuple(size) != tuple(cfg.env.image_size):
        cfg = replace(cfg, env=replace(cfg.env, image_size=tuple(int(v) for v in size)))
    return cfg


# ---- one worker: env + policy + executor, reused across its episodes -------------------------------------
class EpisodeRunner:
    """What one worker holds: the env, the policy behind a ``PolicyRunner``, a ``ChunkExecutor``."""

    def __init__(self, cfg: EvalConfig) -> None:
        import_modules(cfg.imports)
        self.cfg = cfg
        self.policy = load_policy(cfg.checkpoint, cfg.device)
        self.env = apply_stress(
            TabletopEnv(cfg.env), StressConfig(cfg.stress, cfg.stress_severity, cfg.stress_seed)
        )
        self.compensator = None
        if cfg.compensation:
            ccfg = CompensationConfig(trust_region=cfg.compensation_trust_region)
            self.compensator = (
                SelfCompensator.load(cfg.compensator, ccfg) if cfg.compensator else SelfCompensator(7, ccfg)
            )
        env_dim = self.env.action_space.shape[0]
        if self.policy.action_dim != env_dim:
            raise ValueError(
                f"{cfg.checkpoint}: the policy outputs {self.policy.action_dim}-d actions; "
                f"task {cfg.task!r} takes {env_dim}-d actions"
            )
        # the policy's cameras: explicit, else its config's (if it says), else every env camera
        cameras = list(cfg.cameras or getattr(getattr(self.policy, "config", None), "cameras", None) or [])
        cameras = cameras or list(cfg.env.cameras)
        if not set(cameras) <= set(cfg.env.cameras):
            raise ValueError(f"the policy reads cameras {cameras}; the env renders {list(cfg.env.cameras)}")
        self.runner = PolicyRunner(
            self.policy,
            cameras=cameras,
            device=cfg.device,
            cond=cfg.cond,
            guidance=cfg.guidance,
            num_steps=cfg.num_steps,
        )
        h = cfg.horizon or (1 if cfg.temporal_ensemble is not None else self.runner.chunk_size)
        upcycle = self._upcycler(cfg) if cfg.upcycling else None
        self.safety = None
        if cfg.safety:
            profile = PROFILES.get(cfg.robot)
            self.safety = SafetyLayer(
                profile.limits, SafetyConfig(on_rate_violation=cfg.safety), 1.0 / cfg.env.control_hz
            )
        if cfg.async_delay is not None or cfg.rtc:
            self.executor: ChunkExecutor = AsyncChunkExecutor(
                self.runner,
                horizon=h,
                chunk_size=self.runner.chunk_size,
                dt=1.0 / cfg.env.control_hz,
                simulated_delay=cfg.async_delay or 0,
                rtc=cfg.rtc,
                upcycle=upcycle,
            )
        else:
            self.executor = ChunkExecutor(
                self.runner,
                horizon=h,
                chunk_size=self.runner.chunk_size,
                temporal_ensemble=cfg.temporal_ensemble,
                upcycle=upcycle,
            )

    def _upcycler(self, cfg: EvalConfig):
        path = Path(cfg.checkpoint) / UPCYCLING_FILE
        if not path.is_file():
            raise FileNotFoundError(f"upcycling=true needs {path} (written by vla-train from the demos)")
        calib = json.loads(path.read_text())
        try:
            tau = tau_from_calibration(calib, cfg.upcycling_quantile)
        except KeyError as exc:
            raise KeyError(f"{path}: {exc.args[0]}") from None
        ucfg = UpcyclingConfig(
            enabled=True,
            tau=tau,
            delay_margin=cfg.async_delay or 0,
            max_horizon=cfg.upcycling_max,
            replan_tolerance=cfg.upcycling_replan_tolerance,
        )
        scale, dt = np.asarray(calib["scale"]), 1.0 / cfg.env.control_hz
        return lambda chunk, h0, previous: upcycled_horizon(chunk, h0, dt, ucfg, scale, previous)

    def run(self, index: int) -> EpisodeRecord:
        """Episode ``index``: env seed ``seed + index``; written as a video if ``index < videos``."""
        seed = self.cfg.seed + index
        t0 = time.perf_counter()
        obs, _ = self.env.reset(seed=seed)
        self.executor.reset()
        self.runner.reseed(int(np.random.SeedSequence([seed, 1]).generate_state(1)[0]))  # its own stream
        cams = list(self.cfg.env.cameras) if index < self.cfg.videos else []
        frames: dict[str, list[np.ndarray]] = {c: [obs[c]] for c in cams}
        success = False
        prev = obs["state"][:7].astype(np.float64)
        executed = [prev.copy()]
        if self.safety is not None:
            self.safety.reset(obs["state"])
        while True:
            q = obs["state"][:7].astype(np.float64)

            def command(o=obs, q=q, prev=prev) -> np.ndarray:
                """policy -> self-compensation -> (then) the safety layer -> the robot."""
                a = np.array(self.executor.act(o), dtype=np.float64)
                if self.compensator is not None:  # pre-compensate the arm joints
                    a[:7] = self.compensator.compensate(a[:7], q, prev)
                return a

            if self.safety is None:
                action = command()
            else:  # sim time: observations are never stale here; the real node passes message stamps
                t_now = self.env.steps * self.env.dt
                action = self.safety.step(command, obs["state"], t_now, t_now)
            action = action.astype(np.float32)
            next_obs, _, terminated, truncated, info = self.env.step(action)
            if self.compensator is not None:  # learn from what the command did (in the background)
                self.compensator.record(q, action[:7], prev, next_obs["state"][:7])
                prev = np.asarray(action[:7], dtype=np.float64)
            obs = next_obs
            executed.append(obs["state"][:7].astype(np.float64))
            success = success or bool(info["success"])
            for c in cams:
                frames[c].append(obs[c])
            if terminated or truncated:
                break
        if self.compensator is not None:  # pooled by the parent into <out>/compensator.json
            mine = self.cfg.out_dir / COMPENSATION_DIR / f"worker_{os.getpid()}.json"
            self.compensator.save(mine, buffer=True)
        video = None
        if cams:
            path = self.cfg.out_dir / VIDEO_DIR / f"episode_{index:03d}.mp4"
            write_video(path, {c: np.stack(f) for c, f in frames.items()}, round(self.cfg.env.control_hz))
            video = str(path)
        return EpisodeRecord(
            index=index,
            seed=seed,
            success=success,
            length=self.executor.steps,
            policy_calls=self.executor.policy_calls,
            instruction=self.env.instruction,
            wall_s=round(time.perf_counter() - t0, 3),
            video=video,
            horizon=self.executor.horizon,
            chunk_size=self.executor.chunk_size,
            jerk=mean_squared_jerk(np.asarray(executed), 1.0 / self.cfg.env.control_hz),
            mean_horizon=float(np.mean(self.executor.horizons)) if self.executor.horizons else 0.0,
            fault=None if self.safety is None or self.safety.fault is None else self.safety.fault.reason,
            pid=os.getpid(),
            mujoco_gl=os.environ.get("MUJOCO_GL"),
        )

    def close(self) -> None:
        self.env.close()


_WORKER_ARGS: tuple[type, Any] | None = None
_PARENT_GL: str | None = None
_WORKER: Any = None


def _init_worker(runner_cls: type, cfg: Any, mujoco_gl: str | None) -> None:
    """Pool initializer: cheap and cannot fail (heavy set-up errors surface from the first episode)."""
    global _WORKER_ARGS, _PARENT_GL
    import torch

    torch.set_num_threads(1)
    _WORKER_ARGS, _PARENT_GL = (runner_cls, cfg), mujoco_gl


def _worker_episode(index: int) -> Any:
    global _WORKER
    if _WORKER is None:
        assert _WORKER_ARGS is not None
        if os.environ.get("MUJOCO_GL") != _PARENT_GL:  # sim's probe result reaches workers via the env
            raise RuntimeError(
                f"worker has MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}, the parent {_PARENT_GL!r}"
            )
        runner_cls, cfg = _WORKER_ARGS
        _WORKER = runner_cls(cfg)
    return _WORKER.run(index)


def run_episodes(runner_cls: type, cfg: Any, episodes: int, workers: int) -> Iterator[Any]:
    """``runner_cls(cfg).run(i)`` for i in range(episodes), in ``workers`` spawned processes (0: here).

    Results come in completion order. Each worker builds one runner (env + policy) and reuses it.
    """
    if not workers:
        runner = runner_cls(cfg)
        try:
            for i in range(episodes):
                yield runner.run(i)
        finally:
            runner.close()
        return
    ctx = mp.get_context("spawn")
    pool = ProcessPoolExecutor(
        workers,
        mp_context=ctx,
        initializer=_init_worker,
        initargs=(runner_cls, cfg, os.environ.get("MUJOCO_GL")),
    )
    try:
        futures = [pool.submit(_worker_episode, i) for i in range(episodes)]  # first episodes first
        for fut in as_completed(futures):
            yield fut.result()  # a worker's exception is re-raised here, with its traceback as the cause
    except BrokenProcessPool as exc:
        raise RuntimeError(
            "an episode worker process died (killed for memory? a crash in MuJoCo/GL or torch?)"
        ) from exc
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def pool_compensators(out: Path) -> Path:
    """Merge the workers' saved compensators into ``<out>/compensator.json`` (+ its buffer)."""
    parts = sorted((out / COMPENSATION_DIR).glob("worker_*.json"))
    path = SelfCompensator.merged(parts).save(out / COMPENSATOR_FILE, buffer=True)
    shutil.rmtree(out / COMPENSATION_DIR)
    return path


def evaluate(cfg: EvalConfig) -> EvalResult:
    """Run ``cfg.episodes`` episodes of ``cfg.task`` with the checkpoint's policy.

    Writes ``<out>/eval.json`` (config, summary, per-episode records) and ``<out>/videos/episode_<i>.mp4``
    for the first ``cfg.videos`` episodes.
    """
    policy_type = check_checkpoint(cfg)
    cfg = match_policy_images(replace(cfg, out=str(cfg.out_dir.resolve())))  # workers write videos there
    out = cfg.out_dir
    (out / VIDEO_DIR).mkdir(parents=True, exist_ok=True)
    for old in [*(out / VIDEO_DIR).glob("episode_*.mp4"), *(out / COMPENSATION_DIR).glob("worker_*")]:
        old.unlink()  # from an earlier run into the same folder
    workers = min(cfg.workers, cfg.episodes)
    t0 = time.perf_counter()
    records: list[EpisodeRecord] = []
    bar = tqdm(total=cfg.episodes, desc=f"eval {cfg.task}", unit="ep", disable=not cfg.progress)
    try:
        for rec in run_episodes(EpisodeRunner, cfg, cfg.episodes, workers):
            records.append(rec)
            bar.update(1)
            bar.set_postfix(success=f"{sum(r.success for r in records)}/{len(records)}")
    finally:
        bar.close()
    records.sort(key=lambda r: r.index)
    if cfg.compensation:
        pool_compensators(out)
    result = EvalResult(cfg, records, time.perf_counter() - t0, policy_type, workers)
    result.json_path.write_text(json.dumps(result.to_json(), indent=2))
    return result
