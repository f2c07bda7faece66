"""Collect scripted-expert episodes of a task into a LeRobotDataset v3 (crash-safe, resumable)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from sim.env import DEFAULT_IMAGE_SIZE, EnvConfig, TabletopEnv, with_task
from sim.experts import ExpertNoise, ScriptedExpert
from vla.data.schema import (
    ACTION,
    DONE,
    IS_INTERVENTION,
    POLICY_ACTION,
    REWARD,
    SOURCES,
    STATE,
    TASK,
    EpisodeSpec,
    image_key,
)
from vla.data.sidecar import read_sidecar

GIVE_UP_STEPS = 5  # control steps an expert that finished its plan without success goes on recording
STATE_NAMES = [f"joint{i}" for i in range(1, 8)] + ["gripper"]


@dataclass
class CollectConfig:
    """``vla-collect`` options."""

    task: str = "pick_place"
    episodes: int = 10
    out: str = "data/pick_place"
    seed: int = 0
    env: EnvConfig = field(default_factory=lambda: EnvConfig(image_size=DEFAULT_IMAGE_SIZE))  # task: task=
    noise: ExpertNoise = field(default_factory=ExpertNoise)
    source: str = "scripted"
    keep_failures: bool = True  # failed expert episodes are data too (flagged success=False)
    resume: bool = True  # continue an interrupted collection in ``out``
    use_videos: bool = False
    progress: bool = True
    # repack the finished dataset's per-episode files into LeRobot v3's packed layout (vla.data.compact)
    compact: bool = False

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source={self.source!r} not in {SOURCES}")
        if self.episodes < 1:
            raise ValueError(f"episodes={self.episodes} must be >= 1")
        self.env = with_task(self.env, self.task)


def episode_spec(env: TabletopEnv, use_videos: bool = False) -> EpisodeSpec:
    cams = {c: env.cfg.image_size for c in env.cfg.cameras}
    return EpisodeSpec(
        cameras=cams,
        state_dim=8,
        action_dim=8,
        fps=round(env.cfg.control_hz),
        use_videos=use_videos,
        robot_type="panda",
        state_names=STATE_NAMES,
        action_names=STATE_NAMES,
    )


def make_frame(obs: dict, action: np.ndarray, reward: float, done: bool, cameras) -> dict:
    frame = {image_key(c): obs[c] for c in cameras}
    a = np.asarray(action, dtype=np.float32)
    frame.update(
        {
            STATE: obs["state"],
            ACTION: a,
            POLICY_ACTION: a.copy(),  # no policy ran: the proposal is the executed action
            IS_INTERVENTION: np.array([False]),
            REWARD: np.array([reward], dtype=np.float32),
            DONE: np.array([done]),
            TASK: obs["instruction"],
        }
    )
    return frame


def next_seed(root: Path, first: int) -> int:
    """The seed after the last one tried in a resumed collection: one past the highest committed episode's
    seed (the sidecar's ``extra.seed``). Counting committed episodes instead would repeat seeds once a
    failure was dropped (``keep_failures=false``) and write the same scenes twice; the attempts after the
    last committed episode, if any, are tried again (the expert is deterministic per seed)."""
    seeds = [m.extra.get("seed") for m in read_sidecar(root)]
    tried = [int(s) for s in seeds if isinstance(s, int) and s >= first]
    return max(tried) + 1 if tried else first + len(seeds)


def collect(cfg: CollectConfig) -> tuple[int, int, Path]:
    """Run the expert for ``cfg.episodes`` episodes (seeds ``seed .. seed + n - 1``) and write them.

    Returns:
        (successes, episodes attempted in this call, dataset root).
    """
    # The expert finishes its motion after the first success (no cut mid-move), so demos show the arm
    # settling at the goal: what a policy needs to learn to stop there.
    env_cfg = EnvConfig(**{**vars(cfg.env), "render": True, "terminate_on_success": False})
    env = TabletopEnv(env_cfg)
    expert = ScriptedExpert(env, cfg.noise, seed=cfg.seed)
    root = Path(cfg.out)
    spec = episode_spec(env, cfg.use_videos)
    if root.exists() and not cfg.resume:
        raise FileExistsError(f"{root} exists; pass resume=true to continue it or choose another out=")
    from vla.data.writer import EpisodeWriter  # imports lerobot (~9 s): not for --help

    writer = EpisodeWriter(root, spec, resume=root.exists())
    done = writer.num_episodes
    if done:
        print(f"resuming {root}: {done} episodes already there")
    successes = attempts = 0
    seed = next_seed(root, cfg.seed) if done else cfg.seed
    bar = tqdm(
        total=cfg.episodes,
        initial=min(done, cfg.episodes),
        desc=f"collect {cfg.task}",
        disable=not cfg.progress,
        unit="ep",
    )
    try:
        while writer.num_episodes < cfg.episodes:
            obs, _ = env.reset(seed=seed)
            init_state = env.get_state()
            expert.rng = np.random.default_rng([cfg.seed, seed])
            expert.reset()
            success, idle = False, 0
            while True:
                action = expert.act()  # recorded; the env runs it with DART noise if configured
                nobs, reward, terminated, truncated, info = env.step(expert.executed(action))
                success = success or info["success"]
                # the demonstrator is done: at the success, or (a sloppy or failed attempt) a few steps
                # after its plan ended without one (objects may still be settling)
                idle = idle + 1 if expert.done else 0
                end = terminated or truncated or (expert.done and success) or idle > GIVE_UP_STEPS
                writer.add_frame(make_frame(obs, action, reward, end, env_cfg.cameras))
                obs = nobs
                if end:
                    break
            attempts += 1
            successes += success
            if success or cfg.keep_failures:
                extra = {
                    "seed": seed,
                    "task_name": cfg.task,
                    "instruction": env.instruction,
                    "control_hz": env_cfg.control_hz,
                    "init_state": init_state.tolist(),
                    "noise": vars(cfg.noise),
                }
                writer.end_episode(success=success, source=cfg.source, extra=extra)
                bar.update(1)
            else:
                writer.discard_episode()
            bar.set_postfix(success=f"{successes}/{attempts}")
            seed += 1
    finally:
        bar.close()
        writer.close()
        env.close()
    if cfg.compact:
        from vla.data.compact import compact

        print(compact(root).line())
    return successes, attempts, root
