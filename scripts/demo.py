"""The main job, the whole closed loop on a CPU (~15 min):

1. expert demos of every task collected, validated and replayed (the expert table);
2. demos of `reach` -> a deliberately small SFT of our flow-matching VLA;
3. one closed-loop round: rollouts of that policy with a simulated operator taking over (HG-DAgger) ->
   RECAP's distributional value critic -> advantage-conditioned post-training -> evaluation before and
   after, with a plot of success per round and a credit plot of the rollouts.

Each step is one command (printed as it runs).

    make demo            (or: .venv/bin/python scripts/demo.py [--sft-steps 1200] [--rounds 1])
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

import sim  # noqa: F401
from sim.suite import collect_and_replay, markdown_table
from sim.tasks import TASKS

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(cmd: list[str]) -> str:
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    res = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    print(res.stdout[-4000:], flush=True)
    if res.returncode != 0:
        raise SystemExit(f"step failed (exit {res.returncode}): {cmd[0]}")
    return res.stdout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=3, help="expert episodes per task for the replay check")
    p.add_argument("--out", default="outputs/demo")
    p.add_argument("--tasks", nargs="*", default=TASKS.names())
    p.add_argument("--task", default="reach")
    p.add_argument("--demos", type=int, default=100)
    p.add_argument("--sft-steps", type=int, default=1200, help="the deliberately small SFT")
    p.add_argument("--method", default="recap", choices=["recap", "aloe", "habc", "awbc"])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--rollouts", type=int, default=50, help="rollout episodes per round")
    p.add_argument("--post-steps", type=int, default=1000)
    p.add_argument("--eval-episodes", type=int, default=50)
    args = p.parse_args()
    out = (ROOT / args.out).resolve() if not Path(args.out).is_absolute() else Path(args.out)

    print("== 1. expert demos: collect -> validate -> load -> replay ==")
    reports = [
        collect_and_replay(t, args.episodes, out / "experts" / t, sheet=out / f"{t}_episode0.png")
        for t in args.tasks
    ]
    expert_table = markdown_table(reports)
    print(expert_table)

    demos = out / "demos"
    print(f"\n== 2. {args.demos} expert demos of {args.task} -> a small SFT ({args.sft_steps} steps) ==")
    if not (demos / "meta" / "vla_episodes.jsonl").exists():
        run([str(BIN / "vla-collect"), f"task={args.task}", f"episodes={args.demos}", f"out={demos}"])
    sft = out / "sft"
    run(
        [
            str(BIN / "vla-train"),
            f"experiment=sft_{args.task}",
            f"data.roots=[{demos}]",
            f"steps={args.sft_steps}",
            "env=none",
            "max_minutes=null",
            f"out={sft}",
            "progress=false",
        ]
    )
    base = sft / "checkpoints" / "last"

    print(
        f"\n== 3. closed loop: {args.rounds} round(s) of {args.rollouts} rollouts with simulated takeovers "
        f"-> critic -> {args.method} -> evaluation ({args.eval_episodes} episodes) =="
    )
    loop = out / f"loop_{args.method}"
    run(
        [
            str(BIN / "vla-train"),
            f"experiment=posttrain_{args.method}",
            f"init_from={base}",
            f"data.roots=[{demos}]",
            f"loop.rounds={args.rounds}",
            f"loop.rollout_episodes={args.rollouts}",
            f"env.task={args.task}",
            f"env.episodes={args.eval_episodes}",
            f"steps={args.post_steps}",
            f"out={loop}",
            "progress=false",
        ]
    )
    rounds = json.loads((loop / "rounds.json").read_text())
    credit = out / "credit_round1.png"
    run(
        [
            str(BIN / "vla-replay"),
            f"dataset={loop / 'round_1' / 'rollouts'}",
            f"critic={loop / 'round_1' / 'train' / 'critic'}",
            f"plot={credit}",
        ]
    )

    print("\n== summary ==")
    print(expert_table)
    print()
    print(f"{args.method} post-training on {args.task} (success over {args.eval_episodes} episodes):")
    print("| round | success | 95% CI |\n|---|---|---|")
    for r in rounds:
        name = "base SFT" if r["round"] == 0 else f"after round {r['round']}"
        print(
            f"| {name} | {100 * r['success_rate']:.0f}% "
            f"| [{100 * r['success_ci_low']:.0f}, {100 * r['success_ci_high']:.0f}] |"
        )
    print(f"\nplots: {loop / 'rounds.png'} (success per round), {credit} (value/advantage on the rollouts)")
    lift = 100 * (rounds[-1]["success_rate"] - rounds[0]["success_rate"])
    print(f"post-training lift: {lift:+.0f} points")


if __name__ == "__main__":
    main()
