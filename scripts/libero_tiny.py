"""The LIBERO recipe for a pretrained VLA (docs/libero.md) end to end at tiny size on the CPU (a few minutes),
with a tiny LeRobot checkpoint (random weights) in place of a downloaded one:

1. demos: the scripted operator (sim/libero/operator.py) drives libero_object's task 0 (the alphabet soup)
   from ``--demos`` initial states (40 and up, apart from the evaluation's 0 and up), recorded in LeRobot's
   LIBERO layout with success labels (made once, shared by both models);
2. a tiny LeRobot checkpoint folder for LIBERO's inputs (``--model``):
   - ``smolvla``: a tiny SmolVLM backbone and a SmolVLA written by LeRobot's own API;
   - ``pi05``: a tiny PaliGemma-style tokenizer and LeRobot's pi0.5 network at toy sizes, written in the
     layout of LeRobot's ``save_pretrained`` (LeRobot's ``PI05Config`` names only full-size variants, so the
     sizes go to ``vla-train`` as overrides, beside the local tokenizer);
3. ``vla-train experiment=libero_<model>_sft`` from that checkpoint, evaluated per task in LIBERO;
4. ``vla-train experiment=libero_<model>_recap`` from stage 3 for one round: rollouts in LIBERO -> RECAP's
   critic -> post-training -> evaluation.

Each step prints its command. Sizes are for a smoke run (a few training steps, 4-step evaluation episodes),
not for results. Stages 3 and 4 write ``<out>/<model>/sft`` and ``<out>/<model>/recap``.

    python scripts/libero_tiny.py [--model smolvla|pi05] [--out outputs/libero_tiny] [--demos 2]
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sim  # noqa: F401  (GL backend before MuJoCo)
from policies.lerobot_checkpoint import save_lerobot_folder
from policies.pi0.tiny import build_tiny_paligemma_tokenizer, make_tiny_pi0, tiny_size_overrides
from policies.smolvla.tiny import build_tiny_smolvlm, save_lerobot_smolvla
from sim.libero.evaluation import LiberoEvalConfig
from sim.libero.operator import OperatorConfig
from sim.libero.rollout import collect_libero

BIN = Path(sys.executable).parent
SIZE = 32  # images (the tiny networks')
TASK = "pick up the alphabet soup and place it in the basket"
TINY_POLICY = [f"policy.image_size=[{SIZE},{SIZE}]", "policy.chunk_size=8", "policy.num_steps=2"]
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
# LIBERO's inputs in LeRobot's layout; widths padded to 32 as the released checkpoints are
SHAPES: dict[str, Any] = dict(
    cameras=("image", "image2"), state_dim=8, action_dim=7, max_state_dim=32, max_action_dim=32
)


def tiny_smolvla(root: Path) -> tuple[Path, list[str]]:
    """A tiny SmolVLM and a LeRobot SmolVLA written by LeRobot's API; the ``vla-train`` overrides it needs."""
    backbone = build_tiny_smolvlm(root / "smolvlm", texts=[TASK])
    folder = root / "lerobot_smolvla"
    if not folder.exists():
        save_lerobot_smolvla(folder, backbone, image_size=SIZE, **SHAPES)
    return folder, [
        f"policy.vlm_model_name={backbone}",
        "policy.num_vlm_layers=2",
        "policy.tokenizer_max_length=24",
    ]


def tiny_pi05(root: Path) -> tuple[Path, list[str]]:
    """A tiny tokenizer and a LeRobot pi0.5 folder at toy sizes; the ``vla-train`` overrides it needs (the
    local tokenizer, and the sizes a LeRobot pi0.5 ``config.json`` cannot say)."""
    tokenizer = build_tiny_paligemma_tokenizer(root / "tiny_paligemma_tokenizer", texts=[TASK])
    folder = root / "lerobot_pi05"
    if not folder.exists():
        save_lerobot_folder(make_tiny_pi0(root, variant="pi05", image_size=SIZE, **SHAPES), folder)
    return folder, [
        f"policy.tokenizer_path={tokenizer}",
        *tiny_size_overrides(),
        "policy.tokenizer_max_length=64",
    ]


TINY_CHECKPOINTS: dict[str, Callable[[Path], tuple[Path, list[str]]]] = {
    "smolvla": tiny_smolvla,
    "pi05": tiny_pi05,
}


def run(cmd: list[str]) -> None:
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    if subprocess.run(cmd, check=False).returncode != 0:
        raise SystemExit(f"step failed: {cmd[0]} {cmd[1]}")


def demos(out: Path, n: int) -> Path:
    """Stage 1: the operator's demos (once per ``out``)."""
    folder = out / "demos"
    if folder.exists():
        return folder
    print(f"1. {n} demos of libero_object task 0 by the scripted operator -> {folder}", flush=True)
    cfg = LiberoEvalConfig(
        suite="libero_object",
        tasks=["0"],
        episodes=n,
        first_init=40,
        max_steps=200,
        image_size=(SIZE, SIZE),
        workers=0,
        operator=OperatorConfig(patience=0),
    )
    counts = collect_libero(cfg, folder)
    print(f"demos: {counts['successes']}/{counts['episodes']} placed the soup", flush=True)
    return folder


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smolvla", choices=sorted(TINY_CHECKPOINTS))
    p.add_argument("--out", default="outputs/libero_tiny")
    p.add_argument("--demos", type=int, default=2)
    args = p.parse_args()
    out = Path(args.out)
    data = demos(out, args.demos)
    print(f"2. a tiny LeRobot {args.model} checkpoint for LIBERO's inputs", flush=True)
    lerobot, local = TINY_CHECKPOINTS[args.model](out / args.model)
    sft, recap = out / args.model / "sft", out / args.model / "recap"
    run(
        [
            str(BIN / "vla-train"),
            f"experiment=libero_{args.model}_sft",
            f"policy.pretrained_path={lerobot}",
            *local,
            *TINY_POLICY,
            f"data.roots=[{data}]",
            *TINY_RUN,
            f"out={sft}",
        ]
    )
    run(
        [
            str(BIN / "vla-train"),
            f"experiment=libero_{args.model}_recap",
            f"init_from={sft / 'checkpoints/last'}",
            f"data.roots=[{data}]",
            "loop.rounds=1",
            "loop.rollout_episodes=2",
            "algo.critic.steps=5",
            "algo.critic.batch_size=8",
            *TINY_RUN,
            f"out={recap}",
        ]
    )
    print(f"done: {sft}/eval (stage 3, per task), {recap}/rounds.json and rounds.png (stage 4)", flush=True)


if __name__ == "__main__":
    main()
