"""The LIBERO recipe for a pretrained VLA (docs/libero.md) end to end at tiny size on the CPU (a few minutes),
with a tiny LeRobot SmolVLA written by LeRobot's own API (random weights) in place of a downloaded one:

1. demos: the scripted operator (sim/libero/operator.py) drives libero_object's task 0 (the alphabet soup)
   from ``--demos`` initial states (40 and up, apart from the evaluation's 0 and up), recorded in LeRobot's
   LIBERO layout with success labels;
2. a tiny SmolVLM backbone and a tiny LeRobot SmolVLA checkpoint for LIBERO's inputs;
3. ``vla-train experiment=libero_smolvla_sft`` from that checkpoint, evaluated per task in LIBERO;
4. ``vla-train experiment=libero_smolvla_recap`` from stage 3 for one round: rollouts in LIBERO -> RECAP's
   critic -> post-training -> evaluation.

Each step prints its command. Sizes are for a smoke run (a few training steps, 4-step evaluation episodes),
not for results.

    python scripts/libero_tiny.py [--out outputs/libero_tiny] [--demos 2]
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

import sim  # noqa: F401  (GL backend before MuJoCo)
from policies.smolvla.tiny import build_tiny_smolvlm, save_lerobot_smolvla
from sim.libero.evaluation import LiberoEvalConfig
from sim.libero.operator import OperatorConfig
from sim.libero.rollout import collect_libero

BIN = Path(sys.executable).parent
SIZE = 32  # images (the tiny backbone's)
TINY_POLICY = [
    f"policy.image_size=[{SIZE},{SIZE}]",
    "policy.chunk_size=8",
    "policy.num_steps=2",
    "policy.num_vlm_layers=2",
    "policy.tokenizer_max_length=24",
]
TINY_RUN = [
    "env.episodes=1",
    "env.workers=1",
    "env.options.tasks=[0]",
    "env.options.max_steps=4",
    "deploy.horizon=4",
    "batch_size=2",
    "steps=2",
    "save_every=2",
    "threads=1",
    "progress=false",
]


def run(cmd: list[str]) -> None:
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    if subprocess.run(cmd, check=False).returncode != 0:
        raise SystemExit(f"step failed: {cmd[0]} {cmd[1]}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="outputs/libero_tiny")
    p.add_argument("--demos", type=int, default=2)
    args = p.parse_args()
    out = Path(args.out)
    demos = out / "demos"
    if not demos.exists():
        print(
            f"1. {args.demos} demos of libero_object task 0 by the scripted operator -> {demos}", flush=True
        )
        cfg = LiberoEvalConfig(
            suite="libero_object",
            tasks=["0"],
            episodes=args.demos,
            first_init=40,
            max_steps=200,
            image_size=(SIZE, SIZE),
            workers=0,
            operator=OperatorConfig(patience=0),
        )
        counts = collect_libero(cfg, demos)
        print(f"demos: {counts['successes']}/{counts['episodes']} placed the soup", flush=True)
    print("2. a tiny LeRobot SmolVLA for LIBERO's inputs", flush=True)
    backbone = build_tiny_smolvlm(
        out / "smolvlm", texts=["pick up the alphabet soup and place it in the basket"]
    )
    lerobot = out / "lerobot_smolvla"
    # padded to 32 as the released checkpoints are (and as policy=smolvla defaults)
    save_lerobot_smolvla(
        lerobot,
        backbone,
        cameras=("image", "image2"),
        state_dim=8,
        action_dim=7,
        max_state_dim=32,
        max_action_dim=32,
    )
    sft, recap = out / "sft", out / "recap"
    run(
        [
            str(BIN / "vla-train"),
            "experiment=libero_smolvla_sft",
            f"policy.pretrained_path={lerobot}",
            f"policy.vlm_model_name={backbone}",
            *TINY_POLICY,
            f"data.roots=[{demos}]",
            *TINY_RUN,
            f"out={sft}",
        ]
    )
    run(
        [
            str(BIN / "vla-train"),
            "experiment=libero_smolvla_recap",
            f"init_from={sft / 'checkpoints/last'}",
            f"data.roots=[{demos}]",
            "loop.rounds=1",
            "loop.rollout_episodes=2",
            "algo.critic.steps=5",
            "algo.critic.batch_size=8",
            *TINY_RUN,
            f"out={recap}",
        ]
    )
    print(f"done: {sft}/eval (stage 1, per task), {recap}/rounds.json and rounds.png (stage 2)", flush=True)


if __name__ == "__main__":
    main()
