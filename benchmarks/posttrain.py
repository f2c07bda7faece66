"""Post-training in rounds on the MuJoCo tasks: every method against the iterated baselines (``vla-compare``).

    python benchmarks/posttrain.py --method all --task <reach|pick_place> --jobs 2 --threads 1
    python benchmarks/posttrain.py --method recap awbc --task reach       # some methods beside the baselines
    python benchmarks/posttrain.py ... --phase tune --set algo.critic.beta=0.5   # a candidate, tuning seeds
    python benchmarks/posttrain.py --quick --method recap --task reach    # the pipeline at toy sizes
    python benchmarks/posttrain.py --from-record benchmarks/results/rounds_reach.json   # a record's lines

This file is the data design; the comparison itself (arms, lineages of rounds, cache, statistics, plot) is
:mod:`training.compare`, which ``vla-compare`` runs on any data and base.

**Data design** (:data:`DESIGN`, frozen before any reporting run; chosen by what the base SFT and the
baselines do, never by what a method does): DART expert demos (fast, clean); as many *successful but slow*
demos (every free-space move detours through a random point up to 12 cm off its path; on pick_place the
slow operator also moves at half speed in free space); sloppy demos of a miscalibrated operator (goal off
by 5 cm plus noise; mostly failures, kept as failures). The base SFT trains on all three with the RECAP
advantage indicator present (``algo.indicator=success``, dropped out as RECAP drops it; pi*0.6 starts RECAP
from such a base), and deploys unconditioned; every arm starts from it.

**Rounds** (:data:`SETTINGS`, the same for every task; each task's own limits, its episode length T_max,
come from the task): each arm runs ``rounds`` rounds of rollouts of its own latest checkpoint with the
simulated operator, post-training on everything so far, evaluation. Round 1's rollouts (the base's) are
shared by a seed's arms.

Arms: the baselines ``control`` (SFT continued on all data), ``filtered_bc`` (successful episodes only),
``hg_dagger`` (the operator's takeover frames plus successful autonomous episodes and demos); the methods
(``--method``: recap, aloe, habc, awbc, apo, flow_dpo; ablation habc_mc).

**Seeds**: evaluation and rollouts use disjoint seed ranges per phase (``tune`` to choose settings,
``report`` for the record; ``--set``/``--design`` refused in the report phase); 3 training seeds per arm;
``--base-seeds 2`` (the default) runs the best baseline and best method from a second base too.

Writes ``benchmarks/results/rounds_<task>.json`` and ``.png`` (report phase; every arm from this one
run, with the commit, machine, date and wall time) and the tables into ``docs/results.md``. Prints, per arm,
``final success:``, ``takeovers per episode:`` and ``lift over best baseline:``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from _demos import DART, ensure_demos
from _provenance import RESULTS, ROOT, code_version
from omegaconf import OmegaConf

import sim  # noqa: F401  (GL backend before mujoco)
from sim.experts import ExpertNoise
from training.compare import report
from training.compare.arms import ABLATIONS, METHODS
from training.compare.harness import CompareConfig, Settings, compare, key
from training.scripts.compare import show, write
from vla.errors import InputError

DOCS = ROOT / "docs" / "results.md"

# the demos and the base per task (frozen; see the module docstring)
_DESIGN: dict[str, Any] = {
    "experts": 100,
    "slow": 100,
    "slow_noise": {
        "detour_prob": 1.0,
        "detour_scale": 0.12,
        "speed_scale": 1.0,
        "pause_prob": 0.0,
        "pause_steps": 20,
    },
    "sloppy": 100,
    "sloppy_noise": {"aim_std": 0.01, "aim_bias": [0.05, 0.0, 0.0]},
    "base_steps": 2000,
}
# pick_place: its detours alone make a slow demo only 8% longer (most of its time is contact phases), so its
# slow operator also moves at half speed in free space (+46%); the base needs 4000 steps to stay in the
# 20-60% band (chosen on the tuning seeds by the base SFT alone: docs/results.md)
DESIGN: dict[str, dict[str, Any]] = {
    "reach": _DESIGN,
    "pick_place": {
        **_DESIGN,
        "slow_noise": {**_DESIGN["slow_noise"], "speed_scale": 0.5},
        "base_steps": 4000,
    },
}
# the rounds, the same for every task (sized so a task's full record fits 8 hours on two cores)
SETTINGS = Settings(
    rounds=3, steps=300, rollouts=15, eval_episodes=100, round_eval_episodes=15, horizon=3, max_episodes=100
)
QUICK_DESIGN = {"experts": 3, "slow": 2, "sloppy": 2, "base_steps": 10}
QUICK = Settings(rounds=2, steps=3, rollouts=2, eval_episodes=3, round_eval_episodes=2, horizon=3)


def ensure_data(
    task: str, design: dict[str, Any], data_root: Path, jobs: int = 1
) -> tuple[list[Path], list[str]]:
    """The three demo sets of the design (cached by what made them), and their names; with ``jobs`` > 1
    the sets are collected side by side (each set's episodes and seeds are its own, so the same demos)."""
    dart = DART.get(task, ExpertNoise())
    sets = [
        ("experts", design["experts"], dart, 0, False),
        ("slow", design["slow"], ExpertNoise(**{**asdict(dart), **design["slow_noise"]}), 20_000, False),
        ("sloppy", design["sloppy"], _noise(design["sloppy_noise"]), 50_000, True),
    ]
    code = code_version()
    todo = [
        (task, n, data_root / f"{task}_{name}{n}_{key(asdict(noise), seed, code)}", noise, seed, keep)
        for name, n, noise, seed, keep in sets
        if n > 0
    ]
    if jobs > 1 and len(todo) > 1:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process holding GL state
        with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=ctx) as pool:
            list(pool.map(_ensure_set, todo))
    else:
        for args in todo:
            _ensure_set(args)
    return [root for _, _, root, *_ in todo], [name for name, n, *_ in sets if n > 0]


def _ensure_set(args: tuple[str, int, Path, ExpertNoise, int, bool]) -> None:
    task, n, root, noise, seed, keep_failures = args
    ensure_demos(task, n, root, noise, seed=seed, keep_failures=keep_failures)


def _noise(fields: dict[str, Any]) -> ExpertNoise:
    return ExpertNoise(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})


def with_overrides(design: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """``design`` with ``KEY=VALUE`` overrides (dotted keys into its dicts); an unknown key is an error."""
    cfg = OmegaConf.create(design)
    OmegaConf.set_struct(cfg, True)
    cfg.merge_with_dotlist(list(overrides))
    return OmegaConf.to_container(cfg)  # type: ignore[return-value]


def base_overrides(task: str, design: dict[str, Any]) -> list[str]:
    """The base SFT: the task's SFT preset with the RECAP indicator present, for the design's steps."""
    return [f"experiment=sft_{task}", "algo.indicator=success", f"steps={design['base_steps']}"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--method", nargs="+", choices=[*METHODS, *ABLATIONS, "all"], help="all: every method")
    p.add_argument("--task", default="reach", choices=sorted(DESIGN))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument(
        "--base-seeds", type=int, default=2, help="2: the best baseline and method on a second base"
    )
    p.add_argument("--phase", default="report", choices=["tune", "report"])
    p.add_argument("--out", default=str(ROOT / "outputs" / "bench_rounds"), help="cache root")
    p.add_argument("--threads", type=int, default=1, help="torch threads per lineage")
    p.add_argument("--device", default="cpu", help="where training runs: cpu, cuda (recorded)")
    p.add_argument("--base-threads", type=int, default=None, help="torch threads of the base SFT (alone)")
    p.add_argument("--jobs", type=int, default=1, help="lineages side by side (each with --threads)")
    p.add_argument("--no-record", action="store_true", help="do not write the record or the docs")
    p.add_argument("--from-record", type=Path, default=None, metavar="JSON", help="print a record's lines")
    p.add_argument("--quick", action="store_true", help="toy sizes (checks the pipeline; never recorded)")
    p.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", help="tune phase: method overrides")
    p.add_argument("--design", nargs="+", default=[], metavar="KEY=VALUE", help="tune phase: a data design")
    args = p.parse_args()
    if args.from_record:
        try:
            return report.from_record(args.from_record)
        except InputError as e:
            sys.exit(f"posttrain.py: {e}")
    if not args.method:
        p.error("--method is required (or --from-record)")
    if (args.set or args.design) and args.phase != "tune":
        p.error("--set/--design are for the tune phase; the report phase runs the frozen presets and DESIGN")
    started = time.time()
    design = with_overrides(DESIGN[args.task], args.design)
    settings, extra = SETTINGS, list(args.set)
    if args.quick:
        design, settings, args.no_record = {**design, **QUICK_DESIGN}, QUICK, True
        args.seeds = min(args.seeds, 2)
        extra += ["algo.critic.steps=10", "algo.critic.batch_size=32"]
        args.phase = "tune"  # toy overrides of the presets: never the reporting seeds
    out = Path(args.out)
    roots, names = ensure_data(args.task, design, out / "data", args.jobs)
    methods = [*METHODS, *ABLATIONS] if "all" in args.method else list(dict.fromkeys(args.method))
    cfg = CompareConfig(
        task=args.task,
        data=[str(r) for r in roots],
        arms=["control", "filtered_bc", "hg_dagger", *methods],
        out=str(out),
        base_overrides=base_overrides(args.task, design),
        seeds=args.seeds,
        base_seeds=args.base_seeds,
        phase=args.phase,
        settings=settings,
        extra=extra,
        jobs=args.jobs,
        threads=args.threads,
        base_threads=args.base_threads,
        device=args.device,
    )
    record = {**compare(cfg, names), "design": design}
    recorded = not args.no_record and args.phase == "report"
    path = RESULTS / f"rounds_{args.task}.json" if recorded else out / args.task / f"rounds_{args.phase}.json"
    record = write(record, path, started)
    show(record, path)
    if recorded:
        _write_docs(args.task, report.render(record))


def _write_docs(task: str, table: str) -> None:
    start, end = f"<!-- rounds:{task} -->", f"<!-- /rounds:{task} -->"
    text = DOCS.read_text() if DOCS.exists() else "# Results\n"
    block = f"{start}\n{table}\n{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end) :]
    else:
        text += "\n" + block + "\n"
    DOCS.write_text(text)


if __name__ == "__main__":
    main()
