"""``vla-compare``: post-training methods against iterated baselines in closed-loop rounds, on your data.

    vla-compare --task reach --data <demos> [<demos> ...] --base <base checkpoint> \\
        --arms control filtered_bc hg_dagger recap --rounds 3 --seeds 3
    vla-compare ... --base-overrides experiment=sft_reach steps=2000 --base-seeds 2  # train the base(s) too
    vla-compare ... --jobs 2 --threads 1                      # two lineages side by side (one per core)
    vla-compare ... --phase tune --set algo.critic.beta=0.5   # a candidate setting, on the tuning seeds
    vla-compare --from-record <out>/<task>/<phase>_<key>/comparison.json   # a record's lines again

Every arm (``training/compare/arms.py``) runs ``--rounds`` rounds from the same base: rollouts of its own
previous checkpoint with the simulated operator, post-training on all of its data so far, evaluation.
Writes ``comparison.json`` and ``comparison.png`` (success and takeovers per episode against the round, one
line per arm) in the comparison's folder, or where ``--record`` says, and prints the tables and, per arm,
``final success:``, ``takeovers per episode:`` and ``lift over best baseline:``. Interrupted, the same
command resumes: finished lineages come from the cache, an unfinished one resumes its rounds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from training.compare import arms as arms_mod
from training.compare import report
from training.compare.harness import PHASES, CompareConfig, Settings, compare
from vla.errors import InputError
from vla.provenance import provenance, record_json


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vla-compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--task", help="the simulator's task the arms are evaluated and roll out on")
    p.add_argument("--data", nargs="+", default=[], help="data roots every arm trains on (LeRobot v3)")
    p.add_argument("--names", nargs="+", default=None, help="a name per data root for the credit-share table")
    p.add_argument("--base", default=None, help="the base checkpoint every arm starts from")
    p.add_argument(
        "--base-overrides",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="train the base instead: vla-train overrides of the base SFT (e.g. experiment=sft_reach)",
    )
    p.add_argument(
        "--arms",
        nargs="+",
        default=[*arms_mod.BASELINES, *arms_mod.METHODS],
        help=f"baselines and methods (default: every baseline and method); any of {', '.join(arms_mod.ARMS)}",
    )
    d = Settings()
    p.add_argument("--rounds", type=int, default=d.rounds)
    p.add_argument("--steps", type=int, default=d.steps, help="post-training steps per round")
    p.add_argument("--rollouts", type=int, default=d.rollouts, help="operator rollouts per round")
    p.add_argument(
        "--eval-episodes", type=int, default=d.eval_episodes, help="of the base and the last round"
    )
    p.add_argument("--round-eval-episodes", type=int, default=d.round_eval_episodes, help="of rounds before")
    p.add_argument("--horizon", type=int, default=None, help="deploy.horizon (default: the presets')")
    p.add_argument("--max-episodes", type=int, default=None, help="data.max_episodes per data root")
    p.add_argument("--seeds", type=int, default=3, help="training seeds per arm")
    p.add_argument(
        "--base-seeds", type=int, default=1, help="2: a second base for the best baseline and method"
    )
    p.add_argument("--phase", default="report", choices=sorted(PHASES))
    p.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", help="tune phase: method overrides")
    p.add_argument("--jobs", type=int, default=1, help="lineages side by side (worker processes)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per lineage")
    p.add_argument("--device", default="cpu", help="where training runs: cpu, cuda (recorded)")
    p.add_argument("--base-threads", type=int, default=None, help="torch threads of the base SFT")
    p.add_argument("--out", default="outputs/compare", help="cache root")
    p.add_argument("--record", type=Path, default=None, help="where the record goes (default: its folder)")
    p.add_argument("--from-record", type=Path, default=None, metavar="JSON", help="print a record's lines")
    return p


def config(args: argparse.Namespace) -> CompareConfig:
    settings = Settings(
        rounds=args.rounds,
        steps=args.steps,
        rollouts=args.rollouts,
        eval_episodes=args.eval_episodes,
        round_eval_episodes=args.round_eval_episodes,
        horizon=args.horizon,
        max_episodes=args.max_episodes,
    )
    return CompareConfig(
        task=args.task,
        data=[str(Path(d).resolve()) for d in args.data],
        arms=list(args.arms),
        out=args.out,
        base=None if args.base is None else str(Path(args.base).resolve()),
        base_overrides=list(args.base_overrides),
        seeds=args.seeds,
        base_seeds=args.base_seeds,
        phase=args.phase,
        settings=settings,
        extra=list(args.set),
        jobs=args.jobs,
        threads=args.threads,
        base_threads=args.base_threads,
        device=args.device,
    )


def write(record: dict[str, Any], path: Path, started: float) -> dict[str, Any]:
    """``record`` with its provenance to ``path`` (JSON) and its plot beside it (``.png``)."""
    record = {**record, **provenance(started)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(record_json(record))
    report.plot(record, path.with_suffix(".png"))
    return record


def show(record: dict[str, Any], path: Path) -> None:
    print(report.render(record))
    print()
    print("compute: " + "; ".join(report.compute_lines(record)))
    print(f"record: {path}\nplot: {path.with_suffix('.png')}")
    for line in report.acceptance_lines(record):
        print(line)


def main(argv: Sequence[str] | None = None) -> None:
    p = parser()
    args = p.parse_args(argv)
    if args.from_record:
        try:
            return report.from_record(args.from_record)
        except InputError as e:
            sys.exit(f"vla-compare: {e}")
    if not args.task or not args.data:
        p.error("--task and --data are required (or --from-record)")
    started = time.time()
    try:
        cfg = config(args)  # a bad setting or arm: one line
    except ValueError as e:
        sys.exit(f"vla-compare: {e}")
    try:
        record = compare(cfg, args.names)
    except (InputError, ValueError) as e:  # bad data, a refused folder, a setting the policy refuses
        sys.exit(f"vla-compare: {e}")
    path = args.record or Path(record["cells"][0]["out"]).parents[1] / "comparison.json"
    show(write(record, path, started), path)


if __name__ == "__main__":
    main()
