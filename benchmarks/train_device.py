"""The one training loop on an accelerator: a base SFT, then SFT continued and each post-training preset
from that base, every run with ``device=<device>``, on the tests' toy datasets (success visible in the
observations, failed episodes, human takeovers in policy rollouts).

    python benchmarks/train_device.py --device cuda [--steps 300] [--data outputs/train_device_data]

Runs ``python -m training.scripts.train`` (what ``vla-train`` runs) per arm, so the presets, the critics and
the loop are the ones users run; only the sizes are the toy's (the default policy at 32x32 images). Per arm
it records the wall time, the training loss at the start and the end (tensorboard scalars), and the critic's
loss at the start and the end of its fit. It fails when a loss is not finite, when the base's or a critic's
loss does not fall, or when an arm's (continued from the converged base: flat and noisy) more than doubles.
Writes ``benchmarks/results/train_device_<device>.json``.

The datasets are written with lerobot (``--data``, once); a machine without lerobot (a bare GPU image) can
train from datasets written elsewhere: ``--data`` with both folders present skips the writing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _provenance import ROOT, write_record

ARMS = {"sft": False, "recap": True, "aloe": True, "habc": True, "awbc": True, "apo": False, "flow_dpo": True}
"""Each arm's preset, and whether it fits a critic (``--critic-steps`` applies to those)."""


def write_data(folder: Path) -> list[Path]:
    """The toy demos (scripted) and rollouts (policy, with takeovers); kept if already there."""
    demos, rollouts = folder / "demos", folder / "rollouts"
    if not (demos / "meta").exists() or not (rollouts / "meta").exists():
        sys.path.insert(0, str(ROOT / "tests" / "training"))
        from toy_episodes import write_toy_episodes

        write_toy_episodes(demos, n=24, seed=1, source="scripted")
        write_toy_episodes(rollouts, n=32, seed=2)
    return [demos, rollouts]


def train(overrides: list[str], log: Path) -> float:
    """One ``vla-train`` run; its wall seconds. Its output goes to ``log``; a failure raises with the tail."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    start = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "training.scripts.train", *overrides],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    log.write_text(res.stdout + res.stderr)
    if res.returncode != 0:
        raise RuntimeError(f"vla-train {' '.join(overrides)} failed:\n{(res.stdout + res.stderr)[-3000:]}")
    return time.perf_counter() - start


def loss_ends(out: Path) -> tuple[float, float]:
    """Mean training loss over the first and the last tenth of the logged steps."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(out / "tb"))
    acc.Reload()
    values = [e.value for e in acc.Scalars("train/loss")]
    k = max(1, len(values) // 10)
    return sum(values[:k]) / k, sum(values[-k:]) / k


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=300, help="optimiser steps of every arm (and of the base)")
    p.add_argument("--critic-steps", type=int, default=500)
    p.add_argument("--data", default=str(ROOT / "outputs" / "train_device_data"))
    p.add_argument("--out", default=str(ROOT / "outputs" / "train_device"))
    p.add_argument("--no-record", action="store_true")
    args = p.parse_args()
    started = time.time()
    import torch

    roots = write_data(Path(args.data))
    out = Path(args.out) / args.device
    shutil.rmtree(out, ignore_errors=True)  # its scratch: an earlier run's tensorboard events would mix in
    data = f"data.roots=[{','.join(str(r) for r in roots)}]"
    common = [data, "env=none", f"device={args.device}", "threads=1", "progress=false", "batch_size=32"]
    common += ["log_every=5", f"save_every={args.steps}", "resume=false"]
    base = out / "base"
    rows = {}
    wall = train(
        [*common, "policy=flow_matching", "policy.image_size=[32,32]", f"steps={args.steps}", f"out={base}"],
        out / "base.log",
    )
    rows["base"] = {"wall_s": round(wall, 1), "loss": loss_ends(base)}
    for arm, has_critic in ARMS.items():
        arm_out = out / arm
        critic = [f"algo.critic.steps={args.critic_steps}"] if has_critic else []
        wall = train(
            [
                *common,
                f"experiment=posttrain_{arm}",
                f"init_from={base / 'checkpoints' / 'last'}",
                f"steps={args.steps}",
                f"out={arm_out}",
                *critic,
            ],
            out / f"{arm}.log",
        )
        rows[arm] = {"wall_s": round(wall, 1), "loss": loss_ends(arm_out)}
        summary = arm_out / "critic" / "summary.json"
        if summary.exists():
            s = json.loads(summary.read_text())
            rows[arm]["critic_loss"] = (s["critic_loss_start"], s["critic_loss_end"])
    print(f"{'arm':<8} {'wall s':>7} {'loss start':>11} {'loss end':>9} {'critic loss':>20}")
    bad = []
    for arm, r in rows.items():
        (a, b), c = r["loss"], r.get("critic_loss")
        crit = f"{c[0]:.3f} -> {c[1]:.3f}" if c else "-"
        print(f"{arm:<8} {r['wall_s']:>7.1f} {a:>11.4f} {b:>9.4f} {crit:>20}")
        # the base learns from scratch: its loss must fall; an arm continues from a converged base, where
        # the flow-matching loss is flat and noisy: it must stay finite and within 2x of where it started
        if not (math.isfinite(a) and math.isfinite(b) and (b < a if arm == "base" else b < 2 * a)):
            bad.append(f"{arm}: training loss {a:.4f} -> {b:.4f}")
        if c and not (math.isfinite(c[1]) and c[1] < c[0]):
            bad.append(f"{arm}: critic loss {c[0]:.4f} -> {c[1]:.4f}")
    if not args.no_record:
        gpu = torch.cuda.get_device_name() if args.device.startswith("cuda") else None
        record = {"device": args.device, "gpu": gpu, "torch": torch.__version__, "steps": args.steps}
        record |= {"critic_steps": args.critic_steps, "arms": rows, "failures": bad}
        path = write_record(f"train_device_{args.device.split(':')[0]}", record, started)
        if os.environ.get("VLA_COMMIT"):  # a copied tree whose .git is not its own: the commit it came from
            full = json.loads(path.read_text())
            full |= {"commit": os.environ["VLA_COMMIT"], "dirty": None}
            path.write_text(json.dumps(full, indent=2) + "\n")
        print("wrote", path)
    if bad:
        raise SystemExit("losses off: " + "; ".join(bad))


if __name__ == "__main__":
    main()
