"""The deployment control loop at 50 Hz, as a robot runs it: period jitter and inference latency.

    python benchmarks/control_loop.py [--checkpoint <ckpt>] [--seconds 20] [--hz 50]

- **Policy**: a trained checkpoint (default: the reach SFT of ``python benchmarks/sft.py --task reach``;
  without it, the benchmark trains a small reach policy first: 20 demos, 400 steps, a few minutes).
- **Inference in another process** (:class:`vla.runtime.inference_process.InferenceProcess`), pinned to
  its own CPU core; the loop's process is pinned to the other. Asynchronous execution: the next chunk is
  requested while the current one runs.
- **Observations that change every period**: the MuJoCo arm renders both cameras each period
  (:class:`sim.robot.SimRobot` in real-time mode: the loop paces itself to the wall clock).
- **The Panda profile's real limits** with the safety layer in ``hold`` mode (a fault would stop the
  policy: the record says whether one happened).
- The policy acts at 10 Hz; the 50 Hz loop sends setpoints interpolated between its actions
  (``deploy.executor.interpolate = 5``).

Jitter = |measured period - 1/hz| over the periods after the first chunk (the first chunk of an episode
is computed while the robot waits at rest; those warm-up periods are counted and excluded). For scale, the
record also holds the machine's own floor, measured just before: the same pinned core running an empty
loop that only sleeps to the same deadlines, and the time the hypervisor took from the loop's core during
the run (``steal`` in /proc/stat; on a virtual machine it sets how late a sleeping thread can wake).
Prints ``p99 jitter ms: <x>`` last and writes ``benchmarks/results/control_loop.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from _demos import DART, ensure_demos
from _provenance import write_record

import sim  # noqa: F401  (GL backend before mujoco)
from sim.env import EnvConfig, TabletopEnv
from sim.robot import SimRobot
from vla.checkpoint import read_config
from vla.runtime.config import AsyncConfig, DeployConfig, ExecutorConfig
from vla.runtime.inference_process import InferenceProcess
from vla.runtime.loop import paused_gc, run_episode, sleep_until
from vla.runtime.safety import SafetyConfig
from vla.runtime.stack import build_stack
from vla.runtime.subscribers import TrajectoryMetrics

DEFAULT_CKPT = Path("outputs/sft/reach/train/checkpoints/last")
QUICK = Path("outputs/bench_control_loop")


def quick_checkpoint() -> Path:
    """A small reach policy (the SFT preset's architecture, 20 demos, 400 steps) when no SFT run exists."""
    ckpt = QUICK / "train" / "checkpoints" / "last"
    if (ckpt / "model.safetensors").is_file():
        return ckpt
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from training.loop import train
    from training.scripts.train import ConfigStore  # noqa: F401  (registers the train schema)
    from vla.hydra_utils import CONFIG_DIR

    print(f"no checkpoint at {DEFAULT_CKPT}: training a small reach policy into {QUICK} (a few minutes)")
    ensure_demos("reach", 20, QUICK / "demos", DART["reach"])
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        cfg = compose(
            "train",
            overrides=[
                "experiment=sft_reach",
                f"data.roots=[{QUICK / 'demos'}]",
                f"out={QUICK / 'train'}",
                "steps=400",
                "env=none",
                "threads=1",
            ],
        )
    return train(OmegaConf.to_object(cfg))  # type: ignore[arg-type]


def steal_ms(cpu: int | None) -> float:
    """Time the hypervisor took from ``cpu`` so far (ms; NaN where /proc/stat has no steal column)."""
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if cpu is not None and line.startswith(f"cpu{cpu} "):
                return 1000 * int(line.split()[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        pass
    return float("nan")


def idle_floor(seconds: float, hz: float) -> np.ndarray:
    """Jitter (ms) of a loop that only sleeps to the same deadlines: what the machine alone gives."""
    stamps, deadline = [], time.perf_counter()
    for _ in range(int(seconds * hz)):
        deadline += 1 / hz
        sleep_until(deadline)
        stamps.append(time.perf_counter())
    return 1000 * np.abs(np.diff(stamps) - 1 / hz)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", default=None, help=f"default {DEFAULT_CKPT}, else a quick-trained one")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--hz", type=float, default=50.0, help="control loop rate")
    p.add_argument("--policy-hz", type=float, default=10.0, help="the rate the policy was trained at")
    p.add_argument("--horizon", type=int, default=10, help="policy actions executed per chunk")
    p.add_argument("--switch-interval-ms", type=float, default=0.5, help="the GIL's switch interval")
    args = p.parse_args()
    started = time.time()
    ckpt = Path(args.checkpoint) if args.checkpoint else DEFAULT_CKPT
    if args.checkpoint is None and not (ckpt / "model.safetensors").is_file():
        ckpt = quick_checkpoint()
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    loop_cpu, infer_cpu = (cpus[0], cpus[-1]) if len(cpus) > 1 else (None, None)
    if loop_cpu is not None:
        os.sched_setaffinity(0, {loop_cpu})
    sys.setswitchinterval(args.switch_interval_ms / 1000)  # the loop thread gets the GIL back quickly

    k = round(args.hz / args.policy_hz)
    size = tuple(read_config(ckpt).get("image_size", (96, 96)))
    n = int(args.seconds * args.hz)
    env = TabletopEnv(
        EnvConfig(task="reach", control_hz=args.hz, image_size=size, max_steps=n, terminate_on_success=False)
    )
    robot = SimRobot(env, realtime=True)
    server = InferenceProcess(str(ckpt), cpu=infer_cpu, threads=1, seed=0)
    deploy = DeployConfig(
        executor=ExecutorConfig(horizon=args.horizon, interpolate=k),
        async_inference=AsyncConfig(enabled=True),
        safety=SafetyConfig(mode="hold"),
    )
    stack = build_stack(deploy, server, profile=robot.profile, chunk_size=server.chunk_size, dt=1 / args.hz)
    floor_stolen = steal_ms(loop_cpu)
    with paused_gc(True):
        floor = idle_floor(min(10.0, args.seconds), args.hz)
    floor_stolen = steal_ms(loop_cpu) - floor_stolen
    metrics = TrajectoryMetrics()
    stolen = steal_ms(loop_cpu)
    try:
        result = run_episode(robot, stack, seed=0, subscribers=[metrics], max_steps=n)
        stolen = steal_ms(loop_cpu) - stolen
    finally:
        stack.close()
        server.close()
        env.close()
    jitter = metrics.jitter_ms(1 / args.hz)
    warmup = k  # the periods until the second policy step: the first chunk is computed at rest
    steady = jitter[warmup:]
    p50, p99, worst = (
        float(np.percentile(steady, 50)),
        float(np.percentile(steady, 99)),
        float(steady.max()),
    )
    record = {
        "checkpoint": str(ckpt),
        "config": {**vars(args), "interpolate": k, "loop_cpu": loop_cpu, "inference_cpu": infer_cpu},
        "periods": len(jitter),
        "warmup_periods_excluded": warmup,
        "jitter_ms": {"p50": p50, "p99": p99, "max": worst, "max_including_warmup": float(jitter.max())},
        "machine_floor": {
            "idle_loop_jitter_ms": {
                "p50": float(np.percentile(floor, 50)),
                "p99": float(np.percentile(floor, 99)),
                "max": float(floor.max()),
            },
            "idle_loop_seconds": min(10.0, args.seconds),
            "steal_ms_during_idle_loop": floor_stolen,
            "steal_ms_during_run": stolen,
        },
        # the period's own work (decide + command: physics and rendering), before the loop sleeps
        "work_ms": {
            "p50": 1000 * float(np.median(metrics.work_s[warmup:])),
            "p99": 1000 * float(np.percentile(metrics.work_s[warmup:], 99)),
            "max": 1000 * float(np.max(metrics.work_s[warmup:])),
        },
        "inference_ms": {
            "p50": 1000 * float(np.median(server.latencies)),
            "p99": 1000 * float(np.percentile(server.latencies, 99)),
            "round_trip_p50": 1000 * float(np.median(server.round_trips)),
        },
        "policy_calls": result.policy_calls,
        "starved_steps": stack.executor.starved,  # type: ignore[attr-defined]
        "safety_fault": result.fault,
        "safety_interpolated_periods": stack.safety.interpolated if stack.safety else 0,
    }
    path = write_record("control_loop", record, started)
    print(f"record: {path}")
    starved = record["starved_steps"]
    print(f"policy calls: {result.policy_calls}, starved periods: {starved}, fault: {result.fault}")
    print(
        f"inference ms (p50 / p99): {record['inference_ms']['p50']:.1f} / {record['inference_ms']['p99']:.1f}"
    )
    f99 = record["machine_floor"]["idle_loop_jitter_ms"]["p99"]  # type: ignore[index]
    w99 = record["work_ms"]["p99"]  # type: ignore[index]
    print(f"period work (decide + command) p99 ms: {w99:.2f} of {1000 / args.hz:.0f}")
    print(f"machine floor: an empty loop on the same core, p99 jitter ms {f99:.3f}; steal {stolen:.0f} ms")
    print(f"p50 jitter ms: {p50:.3f}")
    print(f"max jitter ms: {worst:.3f}")
    print(f"p99 jitter ms: {p99:.3f}")


if __name__ == "__main__":
    main()
