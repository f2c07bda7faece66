"""Open-loop replay of recorded episodes from their recorded initial state, and contact sheets / videos."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from sim.env import EnvConfig, TabletopEnv
from vla.data.reader import iter_episodes, load_episode, read_episode_info
from vla.data.schema import ACTION, SIDECAR_FILE, SPEC_FILE, EpisodeSpec, image_key
from vla.errors import InputError
from vla.video import write_video


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


def replay_episode(env: TabletopEnv, actions: np.ndarray, extra: dict) -> bool:
    """Reset to the recorded initial state, execute ``actions`` open loop; True if the task succeeded."""
    env.reset(seed=extra.get("seed"), options={"state": np.asarray(extra["init_state"])})
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
    infos = read_episode_info(root)
    spec_path = root / SPEC_FILE  # read here: vla.data.writer's load_spec imports lerobot (seconds)
    if not spec_path.is_file():
        raise InputError(
            f"{spec_path}: missing; replay needs a dataset written by vla-collect or vla-rollout"
        )
    spec = EpisodeSpec.from_json(spec_path.read_text())
    wanted = set(cfg.episodes) if cfg.episodes is not None else None
    infos = [i for i in infos if wanted is None or i.episode_index in wanted]
    if not infos:
        raise InputError(f"{root}: no episodes to replay (episodes={cfg.episodes}); pick existing episodes")
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
        key = (extra["task_name"], extra.get("control_hz", spec.fps))
        if key not in envs:
            envs[key] = TabletopEnv(
                EnvConfig(
                    task=key[0],
                    control_hz=key[1],
                    render=cfg.render,
                    terminate_on_success=False,
                    max_steps=10**9,
                )
            )  # the recorded actions bound it
        ok += replay_episode(envs[key], ep[ACTION], extra)
    for env in envs.values():
        env.close()
    if cfg.sheet or cfg.video:
        ep = load_episode(root, cfg.show, keys=spec.image_keys)
        frames = {
            k.removeprefix("observation.images."): ep[image_key(k.removeprefix("observation.images."))]
            for k in spec.image_keys
        }
        if cfg.sheet:
            from PIL import Image

            Path(cfg.sheet).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(contact_sheet(frames, cfg.sheet_frames)).save(cfg.sheet)
            print(f"contact sheet: {cfg.sheet}")
        if cfg.video:
            Path(cfg.video).parent.mkdir(parents=True, exist_ok=True)
            write_video(Path(cfg.video), frames, spec.fps)
            print(f"video: {cfg.video}")
    return ok, len(infos)
