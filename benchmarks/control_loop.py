"""Control-loop period jitter at 50 Hz while the policy infers in the background.

    python benchmarks/control_loop.py [--seconds 20] [--hz 50]

The loop is the deployment runtime as a robot node runs it: each period it reads a (synthetic)
observation, asks the :class:`~vla.runtime.async_executor.AsyncChunkExecutor` for the action (which
requests chunks from a background inference thread running our flow-matching policy at the SFT preset
size), passes it through the safety layer, and sleeps until the next deadline (coarse sleep, then a
short spin). Jitter = |measured period - 1/hz|. Prints ``p99 jitter ms: <x>`` last and writes
benchmarks/results/control_loop.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

from policies.flow_matching import FlowMatchingConfig, FlowMatchingPolicy
from vla.runtime import PolicyRunner
from vla.runtime.async_executor import AsyncChunkExecutor
from vla.runtime.safety import JointLimits, SafetyConfig, SafetyLayer

RESULTS = Path(__file__).resolve().parent / "results"


def sleep_until(deadline: float, spin_s: float = 0.0015) -> None:
    """Sleep coarsely, then spin the last ``spin_s`` (OS sleep granularity and wake-up latency)."""
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            return
        if left > spin_s:
            time.sleep(left - spin_s)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--hz", type=float, default=50.0)
    p.add_argument("--horizon", type=int, default=10)
    p.add_argument("--threads", type=int, default=1, help="torch threads of the inference worker")
    p.add_argument("--switch-interval-ms", type=float, default=0.5, help="the GIL's switch interval")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    sys.setswitchinterval(args.switch_interval_ms / 1000)  # the control thread gets the GIL back quickly
    dt = 1.0 / args.hz

    cfg = FlowMatchingConfig(chunk_size=20, d_model=128, n_prefix_layers=2, d_expert=128, n_expert_layers=2)
    policy = FlowMatchingPolicy(cfg).eval()
    runner = PolicyRunner(policy, cameras=cfg.cameras, seed=0)
    rng = np.random.default_rng(0)
    obs = {c: rng.integers(0, 255, (*cfg.image_size, 3), dtype=np.uint8) for c in cfg.cameras}
    obs.update(state=np.zeros(8, dtype=np.float32), instruction="reach the red ball")
    t0 = time.perf_counter()
    runner(obs)
    infer_ms = 1000 * (time.perf_counter() - t0)

    executor = AsyncChunkExecutor(runner, horizon=args.horizon, chunk_size=cfg.chunk_size, dt=dt)
    big = 1e3
    safety = SafetyLayer(JointLimits([-big] * 8, [big] * 8, [big] * 8, [big * 1e3] * 8), SafetyConfig(), dt)
    q = np.zeros(8)
    safety.reset(q)
    n = int(args.seconds * args.hz)
    stamps = np.zeros(n)
    executor.act(obs)  # the first (blocking) chunk before the loop starts
    start = time.perf_counter() + dt
    for k in range(n):
        sleep_until(start + k * dt)
        now = time.perf_counter()
        stamps[k] = now
        safety.step(lambda: executor.act(obs), q, obs_time=now, now=now)
    executor.close()
    period = np.diff(stamps)
    jitter_ms = 1000 * np.abs(period - dt)
    p50, p99, worst = (
        float(np.percentile(jitter_ms, 50)),
        float(np.percentile(jitter_ms, 99)),
        float(jitter_ms.max()),
    )
    record = {
        "hz": args.hz,
        "seconds": args.seconds,
        "periods": len(period),
        "jitter_ms": {"p50": p50, "p99": p99, "max": worst},
        "policy_calls": executor.policy_calls,
        "inference_ms_median": 1000 * float(np.median(executor.latencies)),
        "inference_ms_first": infer_ms,
        "starved_steps": executor.starved,
        "faults": None if safety.fault is None else safety.fault.reason,
        "torch_threads": args.threads,
        "switch_interval_ms": args.switch_interval_ms,
        "machine": platform.machine(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "control_loop.json").write_text(json.dumps(record, indent=2))
    print(json.dumps(record, indent=2))
    print(f"p50 jitter ms: {p50:.3f}")
    print(f"p99 jitter ms: {p99:.3f}")


if __name__ == "__main__":
    main()
