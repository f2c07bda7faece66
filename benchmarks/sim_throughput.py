"""Rendered env steps/s against raw MuJoCo step + render of the same scene and model.

    python benchmarks/sim_throughput.py [--task pick_place] [--steps 300] [--size 96]

Prints a table and ``rendered-env / raw-MuJoCo ratio: <x>`` last; writes
benchmarks/results/sim_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import mujoco
import numpy as np

import sim
from sim.env import CAMERAS, EnvConfig, TabletopEnv
from sim.experts import ScriptedExpert
from sim.robots.panda import PANDA

RESULTS = Path(__file__).resolve().parent / "results"


def actions(n: int) -> np.ndarray:
    """A smooth joint-space motion around home (the same for both measurements)."""
    t = np.arange(n)[:, None]
    a = np.tile(np.r_[PANDA.home, 0.04], (n, 1))
    a[:, :7] += 0.3 * np.sin(0.1 * t + np.arange(7))
    a[:, 7] = 0.02 + 0.02 * np.sin(0.2 * t[:, 0])
    return a.astype(np.float32)


def bench_env(task: str, size: int, steps: int) -> float:
    env = TabletopEnv(
        EnvConfig(task=task, image_size=(size, size), terminate_on_success=False, max_steps=10**9)
    )
    env.reset(seed=0)
    acts = actions(steps)
    env.step(acts[0])
    t0 = time.perf_counter()
    for a in acts:
        env.step(a)
    dt = time.perf_counter() - t0
    env.close()
    return steps / dt


def bench_raw(task: str, size: int, steps: int) -> float:
    """The same model and cameras, driven by hand: mj_step x substeps + update_scene/render per camera."""
    env = TabletopEnv(EnvConfig(task=task, image_size=(size, size), render=False))
    env.reset(seed=0)
    model, data, n_sub = env.model, mujoco.MjData(env.model), env.n_substeps
    data.qpos[:] = env.data.qpos
    data.mocap_pos[:] = env.data.mocap_pos
    renderer = mujoco.Renderer(model, size, size)
    cams = [CAMERAS[c] for c in env.cfg.cameras]
    acts = actions(steps)
    mujoco.mj_forward(model, data)
    for cam in cams:  # warm-up (context, textures), as the env bench does with one step
        renderer.update_scene(data, camera=cam)
        renderer.render()
    t0 = time.perf_counter()
    for a in acts:
        data.ctrl[:] = a
        for _ in range(n_sub):
            mujoco.mj_step(model, data)
        for cam in cams:
            renderer.update_scene(data, camera=cam)
            renderer.render()
    dt = time.perf_counter() - t0
    renderer.close()
    return steps / dt


def bench_collect(task: str, size: int, episodes: int) -> float:
    """Expert-driven rendered steps/s (IK included): what collection achieves."""
    env = TabletopEnv(EnvConfig(task=task, image_size=(size, size)))
    expert = ScriptedExpert(env)
    n, t0 = 0, time.perf_counter()
    for seed in range(episodes):
        env.reset(seed=seed)
        expert.reset()
        while True:
            _, _, term, trunc, info = env.step(expert.act())
            n += 1
            if term or trunc or (expert.done and info["success"]):
                break
    dt = time.perf_counter() - t0
    env.close()
    return n / dt


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="pick_place")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--size", type=int, default=96)
    p.add_argument("--episodes", type=int, default=5)
    args = p.parse_args()
    raw = np.median([bench_raw(args.task, args.size, args.steps) for _ in range(3)])
    env = np.median([bench_env(args.task, args.size, args.steps) for _ in range(3)])
    col = bench_collect(args.task, args.size, args.episodes)
    ratio = env / raw
    res = {
        "task": args.task,
        "image_size": args.size,
        "cameras": 2,
        "control_hz": 10,
        "raw_mujoco_steps_per_s": round(float(raw), 1),
        "env_steps_per_s": round(float(env), 1),
        "expert_collection_steps_per_s": round(float(col), 1),
        "ratio": round(float(ratio), 3),
        "gl_backend": sim.GL_BACKEND,
        "mujoco": mujoco.__version__,
        "machine": platform.machine(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "sim_throughput.json").write_text(json.dumps(res, indent=2) + "\n")
    print(f"{'what':<42} {'steps/s':>9}")
    print(f"{'raw MuJoCo step + 2 renders':<42} {raw:>9.1f}")
    print(f"{'TabletopEnv.step (2 cameras)':<42} {env:>9.1f}")
    print(f"{'expert collection (IK + env.step)':<42} {col:>9.1f}")
    print(f"results: {RESULTS / 'sim_throughput.json'}")
    print(f"rendered-env / raw-MuJoCo ratio: {ratio:.2f}")


if __name__ == "__main__":
    main()
