"""Post-training methods against the two simple baselines, on identical data, init, steps and episodes.

    python benchmarks/posttrain.py --method <method|all> --task <reach|pick_place> --seeds 3
        (method: recap, aloe, habc, awbc; the preference methods apo, flow_dpo; the ablation habc_mc)
    python benchmarks/posttrain.py --method recap awbc ...                # several methods in one run
    python benchmarks/posttrain.py ... --jobs 2 --threads 1 --base-threads 2   # two cores: arms side by side
    python benchmarks/posttrain.py ... --phase tune       # the tuning seed range (never the reported one)
    python benchmarks/posttrain.py ... --phase tune --set algo.critic.beta=0.5   # a candidate setting
    python benchmarks/posttrain.py ... --phase tune --design slow_noise.speed_scale=0.7 --base-only
    python benchmarks/posttrain.py --from-record benchmarks/results/posttrain_reach.json  # a record's lines

Arms (all from the same base SFT, post-trained for the same steps on the same demos + rollouts):

- ``control``: SFT continued on all data (``experiment=posttrain_sft``);
- ``filtered_bc``: the same on successful episodes only (``data.only_success=true``): it uses the same episode
  success labels the critics use;
- the method(s): ``experiment=posttrain_<method>``, one preset per method, the same on every task;
- ablation arms (:data:`ABLATIONS`): a method's variant with its own preset file, shown beside the method
  (``habc_mc``: HABC's Monte-Carlo viability advantage beside the spec's one-step form). A method's
  headline is always its own preset's.

A method's headline is its lift over the *stronger* of the two baselines.

**Data design** (:data:`DESIGN`, frozen before any reporting run; chosen by what the base SFT and the
baselines do, never by what a method does): DART expert demos (fast, clean); as many *successful but slow*
demos (every free-space move detours through a random point up to 12 cm off its path; on pick_place the
slow operator also moves at half speed in free space; so they succeed later: every successful demo looks
alike to a filter, but not to a critic that credits time); sloppy demos
of a miscalibrated operator (goal off by 5 cm plus noise; mostly failures, kept as failures); then per seed
rollouts of the base with the simulated operator taking over (HG-DAgger), shared by every arm of that seed
(``loop.base_rollouts_dir``). The rounds are ``training/closed_loop.py``'s (one round per arm).

**Seeds**: evaluation episodes and rollouts use disjoint seed ranges per phase (:data:`PHASES`): ``tune``
(evaluation 30000+, rollouts 300000+) for choosing settings, ``report`` (evaluation 40000+, rollouts
400000+) for the record. Training seed s = 0..seeds-1 per arm; every arm of a seed is evaluated on the same
``--eval-episodes`` episodes.

**Metrics** per arm and seed: success rate; time to success (mean control steps of the successful
episodes: each ends at its success); successes per 1000 control steps (RECAP's throughput). Over seeds: the
mean and a 95% t-interval of each, and of each difference to a baseline (paired by seed). Time to success
is also compared with filtered BC's on the evaluation episodes both arms succeed on (:func:`paired_time`): an
arm that succeeds less often could otherwise look faster by solving only the easy episodes.

**Caches** are keyed by what made them: each arm's folder is named by a hash of its resolved training
config plus the code version (git tree hashes of ``vla/ policies/ training/ sim/ configs/``, and a hash of
their uncommitted diff); the base and the demos likewise. A changed preset or code trains anew.

Writes ``benchmarks/results/posttrain_<task>.json`` (report phase; every arm of the table from this one run,
with its config hash, the commit, machine, date and wall time) and the table into ``docs/results.md``.
Prints, per method, ``lift over control: <pts>``, ``lift over filtered BC: <pts>`` and
``time to success: <method> vs <best baseline>`` and ``time to success on the episodes both succeed: <steps>
[<interval>] steps vs filtered BC``; ``--from-record <json>`` prints these from a stored record.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing
import shutil
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import asdict
from pathlib import Path
from typing import Any

from _credit_share import credit_shares
from _demos import DART, ensure_demos
from _provenance import code_version, provenance
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import sim  # noqa: F401  (GL backend before mujoco)
from sim.experts import ExpertNoise
from sim.tasks import TASKS
from training.closed_loop import closed_loop
from training.config import TrainConfig
from training.loop import Trainer, env_runner
from training.scripts.train import ConfigStore  # noqa: F401  (registers the train schema)
from vla.hydra_utils import CONFIG_DIR
from vla.lock import folder_lock

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs" / "results.md"
METHODS = ("recap", "aloe", "habc", "awbc", "apo", "flow_dpo")  # credit, then preference methods
ABLATIONS = ("habc_mc",)  # variants with a preset of their own (configs/experiment/posttrain_<arm>.yaml)
WALL_FILE = "wall.json"  # how long the run that made a cached folder took
T_975 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}

# the data design per task (frozen; see the module docstring)
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
    "rollouts": 60,
    "steps": 1000,
    "horizon": 3,
}
# pick_place: its detours alone make a slow demo only 8% longer (most of its time is contact phases), so its
# slow operator also moves at half speed in free space (+46%); the base then needs 4000 steps to stay in the
# 20-60% band (chosen on the tuning seeds by the base SFT alone: docs/results.md)
DESIGN: dict[str, dict[str, Any]] = {
    "reach": _DESIGN,
    "pick_place": {
        **_DESIGN,
        "slow_noise": {**_DESIGN["slow_noise"], "speed_scale": 0.5},
        "base_steps": 4000,
    },
}
# an arm's wall time relative to the other arms', for the order they start in (the records: ALOE's online
# critic 30-41 min an arm, every other arm 5-9)
ARM_COST = {"aloe": 5.0}
QUICK = {"experts": 3, "slow": 2, "sloppy": 2, "base_steps": 10, "rollouts": 2, "steps": 3}
PHASES = {"tune": {"eval": 30_000, "rollout": 300_000}, "report": {"eval": 40_000, "rollout": 400_000}}


# ---- keys -------------------------------------------------------------------------------------------------
def key(*parts: Any) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:10]


def _compose(overrides: list[str]) -> TrainConfig:
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        cfg = compose("train", overrides=overrides)
    return OmegaConf.to_object(cfg)  # type: ignore[return-value]


def config_hash(cfg: TrainConfig, code: str) -> str:
    """The resolved training config (without its output folder) and the code version."""
    d = asdict(cfg)
    d["out"] = ""
    return key(d, code)


# ---- statistics -------------------------------------------------------------------------------------------
def mean_ci(values: list[float]) -> tuple[float, float, float]:
    """Mean and a 95% t-interval over seeds (nan bounds with one seed)."""
    v = [x for x in values if not math.isnan(x)]
    n = len(v)
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    m = sum(v) / n
    if n < 2:
        return m, float("nan"), float("nan")
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1))
    half = T_975.get(n - 1, 1.96) * sd / math.sqrt(n)
    return m, m - half, m + half


def fmt(values: list[float], digits: int = 1) -> str:
    m, lo, hi = mean_ci(values)
    if math.isnan(lo):
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


# ---- the run ----------------------------------------------------------------------------------------------
def ensure_data(
    task: str, design: dict[str, Any], data_root: Path, jobs: int = 1
) -> tuple[list[Path], list[str]]:
    """The three demo sets of the design (cached by what made them), and their names; with ``jobs`` > 1
    the sets are collected side by side (each set's episodes and seeds are its own, so the same demos)."""
    sets = [
        ("experts", design["experts"], DART.get(task, ExpertNoise()), 0, False),
        (
            "slow",
            design["slow"],
            ExpertNoise(**{**asdict(DART.get(task, ExpertNoise())), **design["slow_noise"]}),
            20_000,
            False,
        ),
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


def with_overrides(design: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """``design`` with ``KEY=VALUE`` overrides (dotted keys into its dicts); an unknown key is an error."""
    cfg = OmegaConf.create(design)
    OmegaConf.set_struct(cfg, True)
    cfg.merge_with_dotlist(list(overrides))
    return OmegaConf.to_container(cfg)  # type: ignore[return-value]


def _slow_kind(design: dict[str, Any]) -> str:
    """How the design's slow demos are slow, in words for the table's caption."""
    noise = design["slow_noise"]
    kinds = ["detour"] if noise["detour_prob"] > 0 else []
    if noise["speed_scale"] != 1:
        kinds.append(f"free space at {noise['speed_scale']:g}x speed")
    if noise["pause_prob"] > 0:
        kinds.append(f"{noise['pause_steps']}-step pauses")
    return ", ".join(kinds)


def _noise(fields: dict[str, Any]) -> ExpertNoise:
    return ExpertNoise(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})


def arm_overrides(arm: str, task: str, extra: list[str] = ()) -> list[str]:
    """An arm's preset; a method with a critic has its reward normalised by the task's episode limit T_max
    (a property of the task, the same for every method; the presets' own value is reach's). ``extra``'s
    ``algo.critic.*`` overrides apply to the methods that have a critic (not APO)."""
    if arm == "control":
        return ["experiment=posttrain_sft"]
    if arm == "filtered_bc":
        return ["experiment=posttrain_sft", "data.only_success=true"]
    preset = f"experiment=posttrain_{arm}"
    if "critic" not in _compose([preset]).algo:  # APO: labels from the takeovers, no reward
        return [preset, *(o for o in extra if not o.startswith("algo.critic."))]
    return [preset, f"algo.critic.reward.t_max={TASKS.get(task).max_steps}", *extra]


def run_arm(
    arm: str, task: str, common: list[str], seed_dir: Path, code: str, extra: list[str]
) -> dict[str, Any]:
    """One arm of one seed through ``closed_loop`` (one round); cached under its config hash."""
    cfg = _compose([*arm_overrides(arm, task, extra), *common])
    h = config_hash(cfg, code)
    out = seed_dir / f"{arm}_{h}"
    report = out / "rounds.json"
    rounds = json.loads(report.read_text()) if report.exists() else []
    done = next((r for r in rounds if r["round"] == 1 and "success_rate" in r), None)
    made_now = done is None
    if made_now:
        cfg.out = str(out)
        print(f"== {seed_dir.name} {arm} ({h}) ==", flush=True)
        t0 = time.time()
        closed_loop(cfg)
        (out / WALL_FILE).write_text(json.dumps({"wall_minutes": round((time.time() - t0) / 60, 2)}))
        done = next(r for r in json.loads(report.read_text()) if r["round"] == 1)
    return {
        "arm": arm,
        "config_hash": h,
        "out": str(out),
        **_made(out),
        "made_now": made_now,
        **_metrics(done),
    }


def _made(out: Path) -> dict[str, Any]:
    """How long the run that made ``out`` took and when it finished (UTC, the wall file's time); None for a
    folder made before the benchmark timed it. A record resumed from the cache says so with these."""
    path = out / WALL_FILE
    if not path.exists():
        return {"wall_minutes": None, "finished": None}
    return {
        "wall_minutes": json.loads(path.read_text())["wall_minutes"],
        "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(path.stat().st_mtime)),
    }


def _run_arm_logged(arm: str, task: str, common: list[str], seed_dir: Path, code: str, extra: list[str]):
    """``run_arm`` in a worker process, its output to ``<seed dir>/<arm>.log``."""
    seed_dir.mkdir(parents=True, exist_ok=True)
    with open(seed_dir / f"{arm}.log", "a") as log, redirect_stdout(log), redirect_stderr(log):
        return run_arm(arm, task, common, seed_dir, code, extra)


def run_arms(
    args: argparse.Namespace,
    arms: list[str],
    jobs: dict[int, tuple[list[str], Path]],
    code: str,
    extra: list[str],
) -> dict[int, dict[str, dict[str, Any]]]:
    """Every arm of every seed, ``args.jobs`` at a time. A seed's first arm (the control) collects the
    rollouts its other arms share, so those start only when it is done; :func:`next_job` picks the order."""
    results: dict[int, dict[str, dict[str, Any]]] = {s: {} for s in jobs}

    def finished(s: int) -> None:
        if len(results[s]) == len(arms):
            print(f"seed {s}: " + ", ".join(f"{a} {results[s][a]['success']:.0f}%" for a in arms), flush=True)

    if args.jobs <= 1:
        for s, (common, seed_dir) in jobs.items():
            for arm in arms:
                results[s][arm] = run_arm(arm, args.task, common, seed_dir, code, extra)
            finished(s)
        return results
    ctx = multiprocessing.get_context("spawn")  # no fork of a process holding torch and GL state
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=ctx) as pool:
        pending: dict[Future, tuple[int, str]] = {}
        ready = [(s, arms[0]) for s in jobs]
        while ready or pending:
            while ready and len(pending) < args.jobs:  # the pool never holds a queue of its own
                s, arm = next_job(ready, arms[0])
                ready.remove((s, arm))
                common, seed_dir = jobs[s]
                print(f"== {seed_dir.name} {arm}: started (log {seed_dir / (arm + '.log')}) ==", flush=True)
                fut = pool.submit(_run_arm_logged, arm, args.task, common, seed_dir, code, extra)
                pending[fut] = (s, arm)
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                s, arm = pending.pop(fut)
                results[s][arm] = fut.result()
                print(f"== {jobs[s][1].name} {arm}: {results[s][arm]['success']:.0f}% ==", flush=True)
                if arm == arms[0]:
                    ready += [(s, other) for other in arms[1:]]
                finished(s)
    return results


def next_job(ready: list[tuple[int, str]], first: str) -> tuple[int, str]:
    """The (seed, arm) to start next: a seed's first arm (it collects the rollouts that seed's other arms
    wait for), then the costliest (:data:`ARM_COST`: a long arm started last runs alone at the end while
    the other core idles), then the order of ``ready``."""
    return min(ready, key=lambda job: (job[1] != first, -ARM_COST.get(job[1], 1.0)))


def _metrics(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "success": 100 * r["success_rate"],
        "time_to_success": r.get("success_length_mean", float("nan")),
        "per_1000_steps": r.get("successes_per_1000_steps", float("nan")),
        "outcomes": r.get("outcomes", []),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--method",
        nargs="+",
        choices=[*METHODS, *ABLATIONS, "all"],
        help="one or more (their arms side by side with the baselines'); all: every method and ablation arm",
    )
    p.add_argument("--task", default="reach", choices=sorted(DESIGN))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--phase", default="report", choices=sorted(PHASES))
    p.add_argument("--eval-episodes", type=int, default=100)
    p.add_argument("--out", default=str(ROOT / "outputs" / "bench_posttrain"), help="cache root")
    p.add_argument("--threads", type=int, default=2, help="torch threads of every training run")
    p.add_argument(
        "--base-threads",
        type=int,
        default=None,
        help="torch threads of the base SFT, which trains alone (default: --threads); part of its config, "
        "so another count trains another base (the same up to rounding)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="arms trained side by side in worker processes (each with --threads; a seed's control arm runs "
        "first, it collects the rollouts the seed's other arms share; then the costliest first); a worker's "
        "output goes to <seed dir>/<arm>.log. The demo sets are collected side by side too",
    )
    p.add_argument("--no-record", action="store_true", help="do not write the results record or docs")
    p.add_argument(
        "--from-record",
        type=Path,
        default=None,
        metavar="JSON",
        help="print the acceptance lines of a stored record (benchmarks/results/posttrain_<task>.json) "
        "from its per-episode outcomes; trains and evaluates nothing",
    )
    p.add_argument(
        "--quick", action="store_true", help="a smoke run at toy sizes (checks the pipeline; never recorded)"
    )
    p.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="tune phase only: overrides of the method arms' preset (e.g. algo.critic.beta=0.5); the report "
        "phase runs the preset files as they are",
    )
    p.add_argument(
        "--design",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="tune phase only: a candidate data design (e.g. slow_noise.speed_scale=0.7); "
        "the report phase runs DESIGN as it is",
    )
    p.add_argument(
        "--base-seed",
        type=int,
        default=0,
        help="tune phase only: the base SFT's training seed (a second draw of a candidate design's base)",
    )
    p.add_argument(
        "--base-only",
        action="store_true",
        help="stop after the base SFT's evaluation (a data design is chosen by the base and the baselines)",
    )
    args = p.parse_args()
    if args.from_record:
        return from_record(args.from_record)
    if not args.method:
        p.error("--method is required (or --from-record)")
    if (args.set or args.design or args.base_seed) and args.phase != "tune":
        p.error(
            "--set/--design/--base-seed are for the tune phase; the report phase runs the frozen presets, "
            "DESIGN and base seed 0"
        )
    started = time.time()
    design = with_overrides(DESIGN[args.task], args.design)
    method_extra: list[str] = list(args.set)
    if args.quick:
        design = {**design, **QUICK}
        args.eval_episodes, args.no_record = min(args.eval_episodes, 3), True
        method_extra += ["algo.critic.steps=10", "algo.critic.batch_size=32"]
    phase = PHASES[args.phase]
    code = code_version()
    methods = [*METHODS, *ABLATIONS] if "all" in args.method else list(dict.fromkeys(args.method))
    out = Path(args.out)
    roots, names = ensure_data(args.task, design, out / "data", args.jobs)
    cap = max(design["experts"], design["slow"], design["sloppy"], design["rollouts"])

    # the base SFT (cached by its config and the code) and its evaluation on this phase's episodes
    base_cfg = _compose(
        [
            f"experiment=sft_{args.task}",
            f"data.roots=[{','.join(map(str, roots))}]",
            f"data.max_episodes={cap}",
            f"steps={design['base_steps']}",
            f"seed={args.base_seed}",
            "env=none",
            "max_minutes=null",
            f"threads={args.base_threads or args.threads}",
        ]
    )
    base_dir = out / args.task / f"base_{config_hash(base_cfg, code)}"
    base_ckpt = base_dir / "checkpoints" / "last"
    base_made_now = not (base_dir / WALL_FILE).exists()
    if base_made_now:  # the wall file is written when training returns: an interrupted base is redone
        with folder_lock(base_dir, "the post-training benchmark's base SFT"):  # before anything is deleted
            shutil.rmtree(base_dir, ignore_errors=True)
            base_cfg.out = str(base_dir)
            t0 = time.time()
            Trainer(base_cfg).run()
            (base_dir / WALL_FILE).write_text(json.dumps({"wall_minutes": round((time.time() - t0) / 60, 2)}))
    phase_dir = out / args.task / f"{args.phase}_{key(base_dir.name, design, args.eval_episodes)}"
    common = [
        f"init_from={base_ckpt}",
        f"data.roots=[{','.join(map(str, roots))}]",
        f"data.max_episodes={cap}",
        f"steps={design['steps']}",
        f"threads={args.threads}",
        "env=sim",
        f"env.task={args.task}",
        f"env.episodes={args.eval_episodes}",
        f"env.seed={phase['eval']}",
        f"deploy.horizon={design['horizon']}",
        "env.every=0",
        "loop.rounds=1",
        f"loop.rollout_episodes={design['rollouts']}",
        "loop.evaluate_base=false",
        "loop.final_rollouts=false",  # no operator rollouts of each arm's result (its success is measured)
        "max_minutes=null",
    ]
    base_eval = phase_dir / "base_eval.json"
    if not base_eval.exists():
        runner_cfg = _compose([*arm_overrides("control", args.task), *common])
        phase_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        result = env_runner(runner_cfg, phase_dir / "base").run(base_ckpt, 0)
        base_eval.write_text(json.dumps({**result, "wall_minutes": round((time.time() - t0) / 60, 2)}))
    base_eval_result = json.loads(base_eval.read_text())
    base = _metrics(base_eval_result)
    print(
        f"base SFT on {args.task}: {base['success']:.0f}% success, "
        f"time to success {base['time_to_success']:.1f} steps",
        flush=True,
    )
    if args.base_only:
        return

    arms = ["control", "filtered_bc", *methods]
    jobs: dict[int, tuple[list[str], Path]] = {}
    for s in range(args.seeds):
        seed_dir = phase_dir / f"seed_{s}"
        rollouts = seed_dir / "rollouts_round1"
        seed_common = [
            *common,
            f"seed={s}",
            f"loop.rollout_seed={phase['rollout'] + 10_000 * s}",
            f"loop.base_rollouts_dir='{rollouts}'",  # round 1's, made by the base: shared by the seed's arms
        ]
        jobs[s] = (seed_common, seed_dir)
    results = run_arms(args, arms, jobs, code, method_extra)
    per_seed = [results[s] for s in range(args.seeds)]
    for s, (seed_common, seed_dir) in jobs.items():
        for m in methods:
            cfg = _compose([*arm_overrides(m, args.task, method_extra), *seed_common])
            per_seed[s][m]["credit_shares"] = credit_shares(
                Path(per_seed[s][m]["out"]),
                [*roots, seed_dir / "rollouts_round1"],
                [*names, "rollouts"],
                cap,
                cfg.algo["name"],
                dict(cfg.algo.get("critic", {})),
                cfg.batch_size,
            )

    summary = summarise(per_seed, methods)
    table = render(args, design, base, per_seed, summary, methods) + "\n\n" + render_shares(per_seed, methods)
    print(table)
    if not args.no_record and args.phase == "report":
        base_made = _made(base_dir)
        record = {
            "task": args.task,
            "phase": args.phase,
            "seeds": args.seeds,
            "eval_episodes": args.eval_episodes,
            "eval_seeds": phase["eval"],
            "design": design,
            "code_version": code,
            "run": {
                "jobs": args.jobs,
                "threads": args.threads,
                "base_threads": args.base_threads or args.threads,
            },
            "base_config_hash": base_dir.name.removeprefix("base_"),
            "base": {k: v for k, v in base.items() if k != "outcomes"},
            "base_wall_minutes": base_made["wall_minutes"],
            # the base's evaluation on this phase's episodes (None: made before the benchmark timed it)
            "base_eval_wall_minutes": base_eval_result.get("wall_minutes"),
            "base_finished": base_made["finished"],
            "base_made_now": base_made_now,
            # arms this invocation found in the cache (made by an earlier one of the same code and config)
            "arms_from_cache": [
                f"seed_{s}/{a}" for s, row in enumerate(per_seed) for a in arms if not row[a]["made_now"]
            ],
            "compute_minutes": round(
                (base_made["wall_minutes"] or 0.0)
                + (base_eval_result.get("wall_minutes") or 0.0)
                + sum(row[a]["wall_minutes"] or 0.0 for row in per_seed for a in arms),
                1,
            ),
            "arms": {a: [row[a] for row in per_seed] for a in arms},
            "summary": summary,
        }
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"posttrain_{args.task}.json"
        path.write_text(json.dumps({**record, **provenance(started)}, indent=2) + "\n")
        _write_docs(args.task, table)
        print(f"record: {path}")
    print_acceptance(summary, methods)


def print_acceptance(summary: dict[str, Any], methods: list[str]) -> None:
    """The acceptance lines of each method (means over seeds), and the paired time to success."""
    for m in methods:
        s = summary[m]
        print(f"{m}: lift over control: {s['lift_over_control'][0]:.1f}")
        print(f"{m}: lift over filtered BC: {s['lift_over_filtered_bc'][0]:.1f}")
        print(
            f"{m}: time to success: {m} {s['time_to_success'][0]:.1f} vs {s['best_baseline']} "
            f"{s['baseline_time_to_success'][0]:.1f} steps"
        )
        d, lo, hi = s["time_to_success_paired_vs_filtered_bc"]
        print(
            f"{m}: time to success on the episodes both succeed: {d:+.1f} [{lo:.1f}, {hi:.1f}] steps "
            "vs filtered BC"
        )


def from_record(path: Path) -> None:
    """Re-summarise a stored record (its per-episode outcomes) and print its acceptance lines; trains
    nothing."""
    arms = json.loads(path.read_text())["arms"]
    methods = [a for a in arms if a not in ("control", "filtered_bc")]
    per_seed = [{a: rows[i] for a, rows in arms.items()} for i in range(len(arms["control"]))]
    print_acceptance(summarise(per_seed, methods), methods)


def paired_time(per_seed: list[dict[str, dict[str, Any]]], a: str, b: str) -> list[float]:
    """Per seed, the mean of (a's steps - b's steps) over the evaluation episodes both arms succeed on (the
    arms share their episode seeds): time to success without the selection of which episodes succeed."""
    out = []
    for row in per_seed:
        steps_b = {seed: n for ok, n, seed in row[b]["outcomes"] if ok}
        d = [n - steps_b[seed] for ok, n, seed in row[a]["outcomes"] if ok and seed in steps_b]
        out.append(sum(d) / len(d) if d else float("nan"))
    return out


def summarise(per_seed: list[dict[str, dict[str, Any]]], methods: list[str]) -> dict[str, Any]:
    def col(arm: str, metric: str) -> list[float]:
        return [row[arm][metric] for row in per_seed]

    def diff(a: str, b: str, metric: str) -> list[float]:
        return [x - y for x, y in zip(col(a, metric), col(b, metric), strict=True)]

    best = (
        "control"
        if mean_ci(col("control", "success"))[0] >= mean_ci(col("filtered_bc", "success"))[0]
        else "filtered_bc"
    )
    out: dict[str, Any] = {}
    for m in methods:
        out[m] = {
            "success": mean_ci(col(m, "success")),
            "lift_over_control": mean_ci(diff(m, "control", "success")),
            "lift_over_filtered_bc": mean_ci(diff(m, "filtered_bc", "success")),
            "best_baseline": best,
            "lift_over_best_baseline": mean_ci(diff(m, best, "success")),
            "time_to_success": mean_ci(col(m, "time_to_success")),
            "baseline_time_to_success": mean_ci(col(best, "time_to_success")),
            "time_to_success_vs_filtered_bc": mean_ci(diff(m, "filtered_bc", "time_to_success")),
            "time_to_success_paired_vs_filtered_bc": mean_ci(paired_time(per_seed, m, "filtered_bc")),
            "per_1000_steps_vs_filtered_bc": mean_ci(diff(m, "filtered_bc", "per_1000_steps")),
        }
    return out


def _spread(per_seed: list[dict[str, dict[str, Any]]], method: str, group: str) -> str:
    """``mean [q10, q90]`` of a method's per-frame weight in a group, averaged over seeds."""
    cells = [row[method]["credit_shares"].get(group) for row in per_seed]
    cells = [c for c in cells if c and "mean_w" in c]
    if not cells:
        return "-"
    mean = {k: sum(c[k] for c in cells) / len(cells) for k in ("mean_w", "w_q10", "w_q90")}
    return f"{mean['mean_w']:.2f} [{mean['w_q10']:.2f}, {mean['w_q90']:.2f}]"


def _table_head(groups: list[str]) -> list[str]:
    """The header and rule of a markdown table with one column per data group."""
    return ["| method | " + " | ".join(groups) + " |", "|---|" + "---|" * len(groups)]


def render_shares(per_seed: list[dict[str, dict[str, Any]]], methods: list[str]) -> str:
    """Share of each method's actor signal per data group (mean over seeds), beside the group's frames."""
    groups = sorted({g for row in per_seed for m in methods for g in row[m]["credit_shares"]})
    frames = {
        g: mean_ci([row[methods[0]]["credit_shares"].get(g, {}).get("frames", 0.0) for row in per_seed])[0]
        for g in groups
    }
    lines = [
        "Where the actor's signal goes (`benchmarks/_credit_share.py`): the share (%) of the per-frame "
        "weight (RECAP: of the I = 1 frames) on each part of the data, mean over seeds; SFT continued gives "
        "each part its share of the frames, filtered BC gives failed episodes none. ALOE's are its critic's "
        "weights when actor training starts.",
        "",
        *_table_head(groups),
        "| (frames) | " + " | ".join(f"{frames[g]:.1f}" for g in groups) + " |",
    ]
    for m in methods:
        vals = [
            mean_ci([row[m]["credit_shares"].get(g, {}).get("signal", 0.0) for row in per_seed])[0]
            for g in groups
        ]
        lines.append(f"| {m} | " + " | ".join(f"{v:.1f}" for v in vals) + " |")
    lines += [
        "",
        "The per-frame weight within each part, relative to the mean over all frames (1 = what SFT continued "
        "gives every frame; RECAP: an I = 1 frame counts 1/(share of I = 1 frames), an I = 0 frame 0): mean "
        "[10%, 90% quantiles] of each part's frames, averaged over seeds.",
        "",
        *_table_head(groups),
    ]
    for m in methods:
        lines.append(f"| {m} | " + " | ".join(_spread(per_seed, m, g) for g in groups) + " |")
    return "\n".join(lines)


def render(args, design, base, per_seed, summary, methods) -> str:
    arms = ["control", "filtered_bc", *methods]

    def col(arm: str, metric: str) -> list[float]:
        return [row[arm][metric] for row in per_seed]

    lines = [
        f"**Post-training on {args.task}** ({args.phase} phase: evaluation seeds "
        f"{PHASES[args.phase]['eval']}+, "
        f"{args.eval_episodes} episodes per arm and seed, {args.seeds} training seeds; base SFT "
        f"{base['success']:.0f}% after {design['base_steps']} steps on {design['experts']} expert + "
        f"{design['slow']} slow ({_slow_kind(design)}) + {design['sloppy']} sloppy demos; "
        f"{design['rollouts']} rollouts per seed with simulated takeovers; {design['steps']} post-training "
        f"steps; h={design['horizon']})"
        + (f"; method overrides {' '.join(args.set)}" if args.set else "")
        + ".",
        "Mean [95% t-interval over seeds]:",
        "",
        "| arm | success (%) | time to success (steps) | successes / 1000 steps | lift over control | "
        "lift over filtered BC |",
        "|---|---|---|---|---|---|",
    ]
    for a in arms:
        lift_c = (
            ""
            if a == "control"
            else fmt([x - y for x, y in zip(col(a, "success"), col("control", "success"), strict=True)])
        )
        lift_f = (
            ""
            if a in ("control", "filtered_bc")
            else fmt([x - y for x, y in zip(col(a, "success"), col("filtered_bc", "success"), strict=True)])
        )
        lines.append(
            f"| {a} | {fmt(col(a, 'success'))} | {fmt(col(a, 'time_to_success'))} | "
            f"{fmt(col(a, 'per_1000_steps'))} | {lift_c} | {lift_f} |"
        )
    lines.append("")
    lines.append(
        "Per seed, success (%): "
        + "; ".join(", ".join(f"{a} {row[a]['success']:.0f}" for a in arms) for row in per_seed)
        + "."
    )
    lines.append(_provenance_line([row[a] for row in per_seed for a in arms]))
    return "\n".join(lines)


def _provenance_line(cells: list[dict[str, Any]]) -> str:
    """Which arms this invocation trained and which it found in the cache, with when they finished: a record
    resumed after an interruption says so."""
    done = sorted(c["finished"] for c in cells if c["finished"])
    span = f" (finished {done[0]} to {done[-1]})" if done else ""
    cached = sum(not c["made_now"] for c in cells)
    made = len(cells) - cached
    return f"{made} of {len(cells)} arms trained by this invocation, {cached} from the cache{span}."


def _write_docs(task: str, table: str) -> None:
    start, end = f"<!-- posttrain:{task} -->", f"<!-- /posttrain:{task} -->"
    text = DOCS.read_text() if DOCS.exists() else "# Results\n"
    block = f"{start}\n{table}\n{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end) :]
    else:
        text += "\n" + block + "\n"
    DOCS.write_text(text)


if __name__ == "__main__":
    main()
