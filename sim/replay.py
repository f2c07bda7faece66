"""Open-loop replay of recorded episodes from their recorded initial state, and contact sheets / videos.

A plain LeRobot dataset (no ``meta/vla_spec.json``, no sidecar) holds no scene state: its actions are
replayed from the reset of the sim task ``task=`` (or the task whose instruction the episodes carry) with
seed ``seed + episode``, the robot's joints set from the episode's first ``observation.state``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from sim.env import EnvConfig, TabletopEnv
from vla.data.reader import EpisodeInfo, iter_episodes, load_episode, read_episode_info
from vla.data.schema import ACTION, IMAGE_PREFIX, SIDECAR_FILE, SPEC_FILE, STATE, EpisodeSpec
from vla.data.sidecar import is_vla_dataset
from vla.errors import InputError
from vla.video import write_video

PANDA_WIDTH = 8  # state and action of the sim's Panda: 7 arm joints + the finger


@dataclass
class ReplayConfig:
    """``vla-replay`` options."""

    dataset: str = "data/pick_place"
    episodes: list[int] | None = None  # default: all
    sheet: str | None = None  # write a contact sheet PNG of ``show`` here
    video: str | None = None  # write an mp4 of ``show`` here
    show: int = 0  # episode for the sheet / video
    sheet_frames: int = 10
    render: bool = False  # render cameras during replay (slower; only needed to compare images)
    progress: bool = True
    # offline replay through a fitted critic (no simulation): value / advantage along episodes -> PNG
    critic: str | None = None  # a critic folder (<post-training out>/critic)
    plot: str | None = None  # the PNG (default <critic>/credit.png)
    plot_episodes: int = 8
    critic_module: str = "training.critic_replay"  # imported by name: sim does not import training
    # a plain LeRobot dataset (no scene state): the sim task to replay in (None: the registered task whose
    # instruction the episodes carry), and episode e starts from that task's reset with seed + e
    task: str | None = None
    seed: int = 0
    # the simulator: mujoco (our tasks) or libero (sim.libero.replay); on the command line env=<name>
    simulator: str = "mujoco"

    def __post_init__(self) -> None:
        if self.simulator not in ("mujoco", "libero"):
            raise ValueError(f"env={self.simulator}: use one of mujoco, libero")


def replay_episode(env: TabletopEnv, actions: np.ndarray, extra: dict) -> bool:
    """Reset to the recorded initial state, execute ``actions`` open loop; True if the task succeeded."""
    env.reset(seed=extra.get("seed"), options={"state": np.asarray(extra["init_state"])})
    return execute(env, actions)


def execute(env: TabletopEnv, actions: np.ndarray) -> bool:
    """Execute ``actions`` [T, 8] open loop from the env's current state; True if the task succeeded."""
    for a in actions:
        _, _, _terminated, truncated, info = env.step(a)
        if info["success"]:
            return True
        if truncated:
            break
    return False


def contact_sheet(frames: dict[str, np.ndarray], n: int) -> np.ndarray:
    """Tile ``n`` evenly spaced frames per camera: one row per camera. frames: cam -> [T, H, W, 3]."""
    rows = []
    for imgs in frames.values():
        idx = np.linspace(0, len(imgs) - 1, min(n, len(imgs))).round().astype(int)
        rows.append(np.concatenate(list(imgs[idx]), axis=1))
    width = max(r.shape[1] for r in rows)
    rows = [np.pad(r, ((0, 0), (0, width - r.shape[1]), (0, 0))) for r in rows]
    return np.concatenate(rows, axis=0)


def replay(cfg: ReplayConfig) -> tuple[int, int]:
    """Replay episodes; returns (successes, episodes)."""
    root = Path(cfg.dataset)
    if cfg.simulator == "libero":
        from sim.libero.replay import replay_libero

        ok, n = replay_libero(root, cfg.episodes, cfg.progress)
        if cfg.sheet or cfg.video:
            fps, image_keys = _info_layout(root)
            _show(root, cfg, image_keys, fps)
        return ok, n
    ours = is_vla_dataset(root)
    fps, image_keys = _layout(root) if ours else _plain_layout(root)
    infos = read_episode_info(root)
    wanted = set(cfg.episodes) if cfg.episodes is not None else None
    infos = [i for i in infos if wanted is None or i.episode_index in wanted]
    if not infos:
        raise InputError(f"{root}: no episodes to replay (episodes={cfg.episodes}); pick existing episodes")
    ok = _replay_recorded(root, infos, fps, cfg) if ours else _replay_plain(root, infos, fps, cfg)
    if cfg.sheet or cfg.video:
        _show(root, cfg, image_keys, fps)
    return ok, len(infos)


def _layout(root: Path) -> tuple[float, list[str]]:
    """Our dataset's control rate and camera features, from its stored spec."""
    spec_path = root / SPEC_FILE  # read here: vla.data.writer's load_spec imports lerobot (seconds)
    if not spec_path.is_file():
        raise InputError(
            f"{spec_path}: missing; replay needs a dataset written by vla-collect or vla-rollout"
        )
    spec = EpisodeSpec.from_json(spec_path.read_text())
    return spec.fps, spec.image_keys


def _plain_layout(root: Path) -> tuple[float, list[str]]:
    """A plain LeRobot dataset's fps and camera features (``meta/info.json``); state and action must be
    the sim Panda's (8 values each)."""
    info = json.loads((root / "meta/info.json").read_text())
    features = info["features"]
    for key in (STATE, ACTION):
        width = int(np.prod(features[key]["shape"])) if key in features else 0
        if width != PANDA_WIDTH:
            raise InputError(
                f"{root}: field '{key}' has {width} values; replay in the sim needs the Panda's layout "
                f"({PANDA_WIDTH}: 7 arm joint positions + the finger position)"
            )
    return _info_layout(root)


def _info_layout(root: Path) -> tuple[float, list[str]]:
    """A dataset's fps and camera features from ``meta/info.json``."""
    info = json.loads((root / "meta/info.json").read_text())
    cams = [
        k
        for k, ft in info["features"].items()
        if k.startswith(IMAGE_PREFIX) and ft["dtype"] in ("image", "video")
    ]
    return info["fps"], cams


def _replay_recorded(root: Path, infos: list[EpisodeInfo], fps: float, cfg: ReplayConfig) -> int:
    """Our datasets: each episode from its recorded initial state (the sidecar's ``extra``)."""
    envs: dict[tuple, TabletopEnv] = {}
    ok = 0
    by_index = {i.episode_index: i for i in infos}
    episodes = iter_episodes(root, list(by_index), keys=[ACTION])
    for index, ep in tqdm(episodes, total=len(infos), desc="replay", disable=not cfg.progress, unit="ep"):
        info = by_index[index]
        extra = info.extra
        for k in ("task_name", "init_state"):
            if k not in extra:
                raise InputError(
                    f"{root / SIDECAR_FILE}: episode {info.episode_index}: field 'extra.{k}' missing; "
                    "only episodes recorded in sim can be replayed"
                )
        key = (extra["task_name"], extra.get("control_hz", fps))
        if key not in envs:
            envs[key] = _env(key[0], key[1], cfg.render)
        ok += replay_episode(envs[key], ep[ACTION], extra)
    for env in envs.values():
        env.close()
    return ok


def _replay_plain(root: Path, infos: list[EpisodeInfo], fps: float, cfg: ReplayConfig) -> int:
    """A plain LeRobot dataset: each episode from the task's reset (seed + episode index), the robot at the
    episode's first ``observation.state``."""
    task = cfg.task or _sim_task_of(infos)
    if task is None:
        names = sorted({i.task for i in infos})
        raise InputError(
            f"{root}: a plain LeRobot dataset holds no sim task (its instructions {names} name none): pass "
            "task=<name> (vla-tasks lists them)"
        )
    print(
        f"replay from the reset of task {task} (seed={cfg.seed} + episode index), not the recorded scene: a "
        "plain LeRobot dataset holds no scene state; the robot starts at each episode's first "
        "observation.state"
    )
    env = _env(task, fps, cfg.render)
    ok = 0
    episodes = iter_episodes(root, [i.episode_index for i in infos], keys=[STATE, ACTION])
    for index, ep in tqdm(episodes, total=len(infos), desc="replay", disable=not cfg.progress, unit="ep"):
        env.reset(seed=cfg.seed + index, options={"joints": ep[STATE][0]})
        ok += execute(env, ep[ACTION])
    env.close()
    return ok


def _sim_task_of(infos: list[EpisodeInfo]) -> str | None:
    """The one registered sim task whose name or instructions the episodes' instructions are; else None."""
    from sim.tasks.base import TASKS

    said = {i.task for i in infos}
    found = {n for n in TASKS.names() if said & {n, *TASKS.get(n).instructions}}
    return found.pop() if len(found) == 1 else None


def _env(task: str, control_hz: float, render: bool) -> TabletopEnv:
    return TabletopEnv(
        EnvConfig(
            task=task, control_hz=control_hz, render=render, terminate_on_success=False, max_steps=10**9
        )
    )  # the recorded actions bound it


def _show(root: Path, cfg: ReplayConfig, image_keys: list[str], fps: float) -> None:
    """The contact sheet / video of episode ``show``'s recorded camera frames."""
    if not image_keys:
        raise InputError(f"{root}: no camera features (observation.images.<cam>) to show in sheet= / video=")
    ep = load_episode(root, cfg.show, keys=image_keys)
    frames = {k.removeprefix(IMAGE_PREFIX): ep[k] for k in image_keys}
    if cfg.sheet:
        from PIL import Image

        Path(cfg.sheet).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(contact_sheet(frames, cfg.sheet_frames)).save(cfg.sheet)
        print(f"contact sheet: {cfg.sheet}")
    if cfg.video:
        Path(cfg.video).parent.mkdir(parents=True, exist_ok=True)
        write_video(Path(cfg.video), frames, fps)
        print(f"video: {cfg.video}")
