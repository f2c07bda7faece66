"""Success against the number of network evaluations: K integration steps (1, 2, 4, 10) of our Euler and of
diffusers' Heun (2K - 1 evaluations), on reach and pick_place.

    python benchmarks/sampler_steps.py [--tasks reach pick_place] [--steps 1 2 4 10] [--episodes 50]

Checkpoints: the SFT benchmark's (``python benchmarks/sft.py --task <task>``), trained and validated with
K = 10 Euler steps; each integrator is that checkpoint with ``integrator`` set in a copy of its
``config.yaml`` (the weights linked, not copied). Reporting seeds start at 50000 (nothing here is tuned).
Prints one line per task, integrator and K (success with its Wilson interval, network evaluations per
chunk) and writes ``benchmarks/results/sampler_steps.json``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml
from _provenance import write_record

import sim  # noqa: F401
from sim.evaluation import EvalConfig, evaluate

INTEGRATORS = {"euler": lambda k: k, "diffusers_heun": lambda k: 2 * k - 1}  # network evaluations per chunk


def variant(ckpt: Path, integrator: str, root: Path) -> Path:
    """``ckpt`` with ``integrator`` in its config.yaml: a folder of links to its files and its own config."""
    out = root / integrator
    out.mkdir(parents=True, exist_ok=True)
    for f in ckpt.iterdir():
        link = out / f.name
        if f.name != "config.yaml" and not link.exists():
            link.symlink_to(f.resolve())
    config = yaml.safe_load((ckpt / "config.yaml").read_text())
    (out / "config.yaml").write_text(yaml.safe_dump({**config, "integrator": integrator}, sort_keys=False))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=["reach", "pick_place"])
    p.add_argument("--steps", nargs="+", type=int, default=[1, 2, 4, 10])
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=50_000, help="first episode seed (reporting range: 50000+)")
    p.add_argument("--checkpoint-root", default="outputs/sft")
    p.add_argument("--out", default="outputs/bench_sampler")
    args = p.parse_args()
    started = time.time()
    rows = []
    for task in args.tasks:
        ckpt = Path(args.checkpoint_root) / task / "train" / "checkpoints" / "last"
        if not (ckpt / "model.safetensors").is_file():
            raise SystemExit(f"no checkpoint at {ckpt}: run python benchmarks/sft.py --task {task} first")
        for integrator, nfe in INTEGRATORS.items():
            folder = variant(ckpt, integrator, Path(args.out) / task / "checkpoints")
            for k in args.steps:
                r = evaluate(
                    EvalConfig(
                        checkpoint=str(folder),
                        task=task,
                        episodes=args.episodes,
                        workers=args.workers,
                        seed=args.seed,
                        num_steps=k,
                        out=f"{args.out}/{task}/{integrator}_k{k}",
                        videos=0,
                        progress=False,
                    )
                )
                lo, hi = r.ci95
                rows.append(
                    {
                        "task": task,
                        "integrator": integrator,
                        "steps": k,
                        "network_evaluations": nfe(k),
                        "success": r.successes,
                        "episodes": r.n,
                        "ci95": [lo, hi],
                    }
                )
                print(
                    f"{task} {integrator} K={k} ({nfe(k)} evaluations): success {r.successes}/{r.n} "
                    f"[{lo:.2f}, {hi:.2f}]",
                    flush=True,
                )
    write_record("sampler_steps", {"args": vars(args), "rows": rows}, started)


if __name__ == "__main__":
    main()
