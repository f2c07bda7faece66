"""SFT from scratch on expert demos: collect -> train (CPU budget) -> evaluate (docs/results.md).

    python benchmarks/sft.py --task pick_place     # or --task reach
    python benchmarks/sft.py --task reach --minutes 10 --eval-episodes 20   # a quicker look

Training uses the Hydra preset ``experiment=sft_<task>`` (so ``vla-train experiment=sft_<task>`` is the
same run). Prints ``success: k/n`` as its last line and writes benchmarks/results/sft_<task>.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import asdict, replace
from pathlib import Path

from _demos import DART, ensure_demos
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import sim  # noqa: F401  (GL backend before mujoco)
from sim.env import EnvConfig
from sim.evaluation import EvalConfig, evaluate
from sim.experts import ExpertNoise
from training.config import TrainConfig
from training.loop import train
from training.scripts.train import ConfigStore  # noqa: F401  (registers the train schema)
from vla.hydra_utils import CONFIG_DIR
from vla.runtime.config import DeployConfig

RESULTS = Path(__file__).resolve().parent / "results"


def train_step(ckpt: Path) -> int | None:
    """The optimiser step a checkpoint was saved at (the run may stop at its time budget first)."""
    state = ckpt / "train_state" / "state.json"
    if not state.is_file():
        return None
    fields = dict(json.loads(state.read_text()).get("__dict__", []))  # the TrainState dataclass fields
    step = fields.get("step")
    return int(step) if isinstance(step, int) else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="pick_place")
    p.add_argument("--episodes", type=int, default=200, help="expert demos")
    p.add_argument("--minutes", type=float, default=45.0, help="CPU training budget")
    p.add_argument("--eval-episodes", type=int, default=50)
    p.add_argument(
        "--horizon",
        type=int,
        default=None,
        help="actions executed per chunk at evaluation (default: the preset's)",
    )
    p.add_argument("--dart", type=float, default=None, help="DART execution noise, rad (default: per task)")
    p.add_argument(
        "--contact-scale", type=float, default=None, help="DART noise factor in contact phases (per task)"
    )
    p.add_argument("--eval-only", action="store_true", help="evaluate <out>/train's checkpoint, no training")
    p.add_argument("--eval-during-training", action="store_true", help="keep the preset's periodic sim eval")
    p.add_argument("--out", default=None)
    p.add_argument("--demos", default=None, help="dataset folder of the demos (default <out>/demos)")
    p.add_argument("--tag", default=None, help="results file sft_<task>_<tag>.json (default sft_<task>.json)")
    p.add_argument("overrides", nargs="*", help="extra vla-train overrides, e.g. steps=3000")
    args = p.parse_args()
    out = Path(args.out or f"outputs/sft/{args.task}")
    data = Path(args.demos) if args.demos else out / "demos"
    noise = DART.get(args.task, ExpertNoise())
    if args.dart is not None:
        noise = replace(noise, execute_std=args.dart)
    if args.contact_scale is not None:
        noise = replace(noise, contact_scale=args.contact_scale)
    if not args.eval_only:
        ensure_demos(args.task, args.episodes, data, noise)

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        cfg = compose(
            "train",
            overrides=[
                f"experiment=sft_{args.task}",
                f"data.roots=[{data}]",
                f"out={out / 'train'}",
                f"max_minutes={args.minutes}",
                f"data.max_episodes={args.episodes}",
                *([] if args.eval_during_training else ["env=none"]),
                *args.overrides,
            ],
        )
    tcfg: TrainConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    name = f"sft_{args.task}" + (f"_{args.tag}" if args.tag else "")
    if args.eval_only:  # re-evaluate the trained checkpoint (e.g. at another horizon); training time kept
        ckpt = Path(tcfg.out) / "checkpoints" / "last"
        if not (ckpt / "model.safetensors").is_file():
            raise FileNotFoundError(f"--eval-only: no trained checkpoint at {ckpt}")
        old = RESULTS / f"{name}.json"
        train_min = (
            json.loads(old.read_text()).get("train_minutes", float("nan")) if old.is_file() else float("nan")
        )
    else:
        t0 = time.perf_counter()
        ckpt = train(tcfg)
        train_min = (time.perf_counter() - t0) / 60

    ecfg = EvalConfig(
        checkpoint=str(ckpt),
        task=args.task,
        episodes=args.eval_episodes,
        workers=2,
        seed=10_000,
        deploy=DeployConfig(horizon=args.horizon or tcfg.deploy.horizon or 10),
        out=str(out / "eval"),
        videos=3,
        env=EnvConfig(task=args.task, image_size=tuple(tcfg.policy["image_size"])),
    )
    result = evaluate(ecfg)
    print(result.table())
    lo, hi = result.ci95
    record = {
        "task": args.task,
        "demos": args.episodes,
        "dart": asdict(noise),
        "train_minutes": round(train_min, 1),
        "budget_minutes": args.minutes,
        "steps": tcfg.steps,
        "steps_done": train_step(ckpt),
        "horizon": args.horizon or tcfg.deploy.horizon or 10,
        "success": result.successes,
        "episodes": result.n,
        "success_rate": result.success_rate,
        "ci95": [lo, hi],
        "mean_length": result.mean_length,
        "calls_per_episode": result.calls_per_episode,
        "policy": tcfg.policy,
        "checkpoint": str(ckpt),
        "machine": platform.machine(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"success: {result.successes}/{result.n}")


if __name__ == "__main__":
    main()
