"""One post-training method against the control ("SFT continued on the same data"), over seeds.

    python benchmarks/posttrain.py --method recap --seeds 3      # or aloe | habc | awbc

On the fixed task (reach by default):

1. 100 DART expert demos plus 200 demos of a sloppy demonstrator -- a miscalibrated operator whose
   every goal is off by ``aim_bias`` (5 cm along x) plus N(0, aim_std^2) per episode, so nearly all of
   its demos fail (kept as failed demos) -- the mixed-quality data that credit methods are for and plain
   BC imitates; collected once; then a deliberately weak base SFT on both (few steps; cached).
   Earlier designs (docs/results.md): ``--sloppy 100`` is session 6's; ``--sloppy 100 --aim-bias 0,0,0
   --aim-std 0.04`` is session 4/5's (zero-mean near misses, which partly average out under BC and
   leave only ~7 points to any filtering);
2. per seed s: rollouts of the base with the simulated operator (HG-DAgger takeovers), shared by the
   method and the control of that seed;
3. the control: ``vla-train experiment=posttrain_sft`` from the base on demos + rollouts (cached per seed);
4. the method: ``vla-train experiment=posttrain_<method>`` from the base on the same data;
5. both evaluated on the same episodes.

Everything is cached under ``--out``; a design's folder records its settings in ``design.json``, and a
run whose --base-steps, --rollouts, --eval-episodes, --horizon or demo settings differ stops with an
error instead of reusing caches made with others.

Writes benchmarks/results/posttrain_<method>.json, a markdown table (mean and 95% interval over seeds)
into docs/results.md, and prints ``lift over control: <points>`` as its last line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import time
from pathlib import Path

from _demos import DART, ensure_demos
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import sim  # noqa: F401  (GL backend before mujoco)
from sim.evaluation import EvalConfig, evaluate
from sim.experts import ExpertNoise
from sim.rollout import RolloutConfig, rollout
from sim.teleop import TeleopConfig
from training.config import TrainConfig
from training.loop import train
from training.scripts.train import ConfigStore  # noqa: F401  (registers the train schema)
from vla.hydra_utils import CONFIG_DIR
from vla.runtime.config import DeployConfig, ExecutorConfig

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs" / "results.md"
DEFAULT_STEPS = 1000
T_975 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def _compose(overrides: list[str]) -> TrainConfig:
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        cfg = compose("train", overrides=overrides)
    return OmegaConf.to_object(cfg)  # type: ignore[return-value]


def _evaluate(ckpt: Path, task: str, episodes: int, out: Path, horizon: int) -> dict:
    r = evaluate(
        EvalConfig(
            checkpoint=str(ckpt),
            task=task,
            episodes=episodes,
            workers=2,
            seed=20_000,  # the same episodes for every policy; unlike demo, rollout and training seeds
            deploy=DeployConfig(executor=ExecutorConfig(horizon=horizon)),
            out=str(out),
            videos=0,
            progress=False,
        )
    )
    return {"success": r.successes, "episodes": r.n, "rate": r.success_rate, "ci95": list(r.ci95)}


def mean_ci(values: list[float]) -> tuple[float, float, float]:
    """Mean and a 95% t-interval over seeds."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, float("nan"), float("nan")
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    half = T_975.get(n - 1, 1.96) * sd / math.sqrt(n)
    return m, m - half, m + half


# what the cached demos, base, rollouts and evaluations under one --out folder were made with
DESIGN = (
    "task",
    "demos",
    "demo_dir",
    "sloppy",
    "aim_std",
    "aim_bias",
    "base_steps",
    "rollouts",
    "eval_episodes",
    "horizon",
)


def _check_design(out: Path, design: dict, p: argparse.ArgumentParser) -> None:
    """The cache folder's design.json must match this run: a cached base trained for other --base-steps,
    or evaluations over other --eval-episodes, would otherwise be reused silently. Written on first use
    (folders cached before it existed are adopted as they are)."""
    path = out / "design.json"
    if path.exists():
        had = json.loads(path.read_text())
        diff = [
            f"--{k.replace('_', '-')} {had.get(k)!r} -> {v!r}" for k, v in design.items() if had.get(k) != v
        ]
        if diff:
            p.error(
                f"{out} caches a base, rollouts and evaluations made with other settings "
                f"({'; '.join(diff)}). Give this design its own --out, or delete {out} to start over"
            )
        return
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(design, indent=2))


def _cached(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--method", required=True, choices=["recap", "aloe", "habc", "awbc"])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--task", default="reach")
    p.add_argument("--demos", type=int, default=100)
    p.add_argument(
        "--demo-dir",
        default="outputs/bench_posttrain/{task}_demos{demos}",
        help="dataset folder of the DART expert demos (collected if missing). It should hold exactly --demos "
        "episodes: data.max_episodes caps each root at max(--demos, --sloppy, --rollouts)",
    )
    p.add_argument("--sloppy", type=int, default=200, help="demos of the sloppy demonstrator (0: none)")
    p.add_argument(
        "--aim-std", type=float, default=0.01, help="the sloppy demonstrator's random goal error (std), m"
    )
    p.add_argument(
        "--aim-bias",
        default="0.05,0,0",
        help="the sloppy demonstrator's systematic goal offset x,y,z in m (a miscalibrated operator)",
    )
    p.add_argument("--base-steps", type=int, default=2000, help="the deliberately weak base SFT")
    p.add_argument(
        "--steps", type=int, default=DEFAULT_STEPS, help="post-training steps (method and control)"
    )
    p.add_argument("--rollouts", type=int, default=60, help="rollout episodes per seed")
    p.add_argument("--eval-episodes", type=int, default=50)
    p.add_argument("--horizon", type=int, default=3, help="actions executed per chunk (rollouts, evaluation)")
    p.add_argument(
        "--out",
        default="outputs/bench_posttrain",
        help="cache root: each data design gets a subfolder, whose design.json records what its cached base, "
        "rollouts and evaluations were made with (a run with other settings stops with an error)",
    )
    p.add_argument("--threads", type=int, default=2, help="torch threads of every training run")
    p.add_argument(
        "--tag",
        default=None,
        help="names this arm's cache, results file and docs block (default: a hash of the overrides)",
    )
    p.add_argument(
        "overrides", nargs="*", help="extra vla-train overrides for the method, e.g. algo.guidance=1.5"
    )
    args = p.parse_args()
    demo_dir = p.get_default("demo_dir").format(task=args.task, demos=args.demos)
    args.demo_dir = args.demo_dir.format(task=args.task, demos=args.demos)
    # runs of another length are other arms (and must not resume a shorter run's checkpoint)
    suffix = "" if args.steps == DEFAULT_STEPS else f"_{args.steps}steps"
    arm = arm_name(args.method, args.overrides, args.tag) + suffix
    bias = tuple(float(v) for v in args.aim_bias.split(","))
    if len(bias) != 3:
        p.error(f"--aim-bias needs x,y,z, got {args.aim_bias!r}")
    kind = "biased" if any(bias) else "mixed"
    out = Path(args.out) / (f"{args.task}_{kind}{args.sloppy}" if args.sloppy else args.task)
    demos = Path(args.demo_dir)
    sloppy = out / "demos_sloppy"
    t0 = time.perf_counter()
    _check_design(out, {k: getattr(args, k) for k in DESIGN} | {"aim_bias": list(bias)}, p)

    have = ensure_demos(args.task, args.demos, demos, DART.get(args.task, ExpertNoise()))
    cap = max(args.demos, args.sloppy, args.rollouts)  # data.max_episodes: the same cap on every root
    if have > args.demos and cap > args.demos:
        p.error(
            f"--demo-dir {demos} holds {have} episodes, more than --demos {args.demos}; data.max_episodes "
            f"is per root, so {min(have, cap)} of them would be trained on. Give a folder with exactly "
            f"{args.demos} (the default {p.get_default('demo_dir')} is one)"
        )
    if args.sloppy:
        sloppy_noise = ExpertNoise(aim_std=args.aim_std, aim_bias=bias)  # type: ignore[arg-type]
        ensure_demos(args.task, args.sloppy, sloppy, sloppy_noise, seed=50_000, keep_failures=True)
    roots = [demos, sloppy] if args.sloppy else [demos]

    base_dir = out / "base"
    base_ckpt = base_dir / "checkpoints" / "last"
    if not (base_ckpt / "model.safetensors").exists():
        cfg = _compose(
            [
                f"experiment=sft_{args.task}",
                f"data.roots=[{','.join(map(str, roots))}]",
                f"data.max_episodes={max(args.demos, args.sloppy)}",
                f"steps={args.base_steps}",
                f"out={base_dir}",
                "env=none",
                "max_minutes=null",
                f"threads={args.threads}",
            ]
        )
        train(cfg)
    base = _cached(out / "base_eval.json")
    if base is None:
        base = _evaluate(base_ckpt, args.task, args.eval_episodes, out / "base_eval", args.horizon)
        (out / "base_eval.json").write_text(json.dumps(base))
    print(f"base SFT: {base['success']}/{base['episodes']}")

    rows = []
    for s in range(args.seeds):
        sdir = out / f"seed_{s}"
        rollouts = sdir / "rollouts"
        if not (rollouts / "meta" / "vla_episodes.jsonl").exists():
            rollout(
                RolloutConfig(
                    checkpoint=str(base_ckpt),
                    task=args.task,
                    episodes=args.rollouts,
                    workers=2,
                    seed=100_000 + 1000 * s,
                    deploy=DeployConfig(executor=ExecutorConfig(horizon=args.horizon)),
                    out=str(rollouts),
                    teleop=TeleopConfig(),
                )
            )
        common = [
            f"init_from={base_ckpt}",
            f"data.roots=[{','.join(map(str, [*roots, rollouts]))}]",
            f"data.max_episodes={max(args.demos, args.sloppy, args.rollouts)}",
            f"steps={args.steps}",
            f"seed={s}",
            "env=none",
            f"threads={args.threads}",
        ]
        result = {}
        for key, name, exp, extra in (
            ("control", "control" + suffix, "posttrain_sft", []),
            (arm, arm, f"posttrain_{args.method}", list(args.overrides)),
        ):
            cache = sdir / f"{name}_eval.json"
            got = _cached(cache)
            if got is None:
                ckpt = train(_compose([f"experiment={exp}", f"out={sdir / name}", *common, *extra]))
                got = _evaluate(ckpt, args.task, args.eval_episodes, sdir / f"{name}_eval", args.horizon)
                cache.write_text(json.dumps(got))
            result[key] = got
            print(f"seed {s} {name}: {got['success']}/{got['episodes']}")
        rows.append(result)

    ctrl = [100 * r["control"]["rate"] for r in rows]
    meth = [100 * r[arm]["rate"] for r in rows]
    lift = [m - c for m, c in zip(meth, ctrl, strict=True)]
    table = _table(args, arm, base, ctrl, meth, lift)
    record = {
        "method": args.method,
        "arm": arm,
        "task": args.task,
        "seeds": args.seeds,
        "base": base,
        "per_seed": rows,
        "control_mean": mean_ci(ctrl)[0],
        "method_mean": mean_ci(meth)[0],
        "lift_points": mean_ci(lift)[0],
        "args": vars(args),
        "wall_minutes": round((time.perf_counter() - t0) / 60, 1),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    # another data design (its own cache folder) gets its own record and docs block
    default_data = args.demo_dir == demo_dir and all(
        getattr(args, k) == p.get_default(k) for k in ("task", "demos", "sloppy", "aim_bias", "aim_std")
    )
    name = arm if default_data else f"{arm}_{out.name}"
    (RESULTS / f"posttrain_{name}.json").write_text(json.dumps(record, indent=2))
    _write_docs(name, table)
    print(table)
    print(f"lift over control: {mean_ci(lift)[0]:.1f}")


def arm_name(method: str, overrides: list[str], tag: str | None) -> str:
    """The method's arm: its cache folder, results file and docs block. Runs with different overrides
    must not share cached evaluations, so overrides without a tag get a hash of their own."""
    if tag:
        return f"{method}_{tag}"
    if not overrides:
        return method
    return f"{method}_{hashlib.sha1(' '.join(overrides).encode()).hexdigest()[:8]}"


def _table(args, arm, base, ctrl, meth, lift) -> str:
    def fmt(v):
        m, lo, hi = mean_ci(v)
        return f"{m:.1f} [{lo:.1f}, {hi:.1f}]" if not math.isnan(lo) else f"{m:.1f}"

    per_seed = ", ".join(f"{c:.0f} -> {m:.0f}" for c, m in zip(ctrl, meth, strict=True))
    return "\n".join(
        [
            f"**{arm} vs control on {args.task}** ({args.seeds} seeds; base SFT "
            f"{100 * base['rate']:.0f}% after {args.base_steps} steps on {args.demos} expert + "
            f"{args.sloppy} sloppy demos (goal offset {args.aim_bias} m + N(0, {args.aim_std}^2)); per seed "
            f"{args.rollouts} rollouts with simulated takeovers; {args.steps} post-training steps; "
            f"{args.eval_episodes} evaluation episodes each).",
            "Success in %, mean [95% t-interval over seeds]:",
            "",
            "| policy | success (%) |",
            "|---|---|",
            f"| base SFT | {100 * base['rate']:.1f} |",
            f"| control: SFT continued on demos + rollouts | {fmt(ctrl)} |",
            f"| {arm}{' (' + ' '.join(args.overrides) + ')' if args.overrides else ''} | {fmt(meth)} |",
            f"| lift (points) | {fmt(lift)} |",
            "",
            f"Per seed (control -> {arm}): {per_seed}.",
        ]
    )


def _write_docs(method: str, table: str) -> None:
    start, end = f"<!-- posttrain:{method} -->", f"<!-- /posttrain:{method} -->"
    text = DOCS.read_text() if DOCS.exists() else "# Results\n"
    block = f"{start}\n{table}\n{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end) :]
    else:
        if "## Post-training" not in text:
            text += (
                "\n## Post-training: methods against the control\n\n"
                "`python benchmarks/posttrain.py --method <name> --seeds 3`\n"
            )
        text += "\n" + block + "\n"
    DOCS.write_text(text)


if __name__ == "__main__":
    main()
