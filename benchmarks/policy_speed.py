"""Train-step throughput and chunk-sampling latency: our flow-matching VLA against LeRobot's SmolVLA at the
same tiny size, batch and chunk length, in one run.

    python benchmarks/policy_speed.py [--batch 8] [--chunk 10] [--steps 10] [--threads 1]

SmolVLA trains its action expert only (LeRobot's default: frozen VLM); ours trains everything. Prints both
ratios (SmolVLA time / ours) last; writes benchmarks/results/policy_speed.json.
"""

from __future__ import annotations

import argparse
import tempfile

import torch
from _timing import fake_batch, fake_obs, median_seconds, write_result

from policies.flow_matching import FlowMatchingPolicy, debug_config
from policies.smolvla.tiny import make_tiny_smolvla

CAMERAS, IMAGE, STATE, ACTION = ["agentview", "wrist"], 32, 8, 8


def measure(policy: torch.nn.Module, batch: dict, obs: dict, k: int) -> tuple[float, float, int]:
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)

    def train_step() -> None:
        policy.train()
        loss = policy.loss(batch).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    def sample() -> None:
        policy.eval()
        policy.sample_chunk(obs, num_steps=k)

    return median_seconds(train_step), median_seconds(sample), sum(p.numel() for p in policy.parameters())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--chunk", type=int, default=10)
    p.add_argument("--steps", type=int, default=10, help="K Euler steps")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    batch = fake_batch(CAMERAS, [IMAGE, IMAGE], STATE, ACTION, args.chunk, args.batch)
    obs = fake_obs(CAMERAS, [IMAGE, IMAGE], STATE, 1)
    ours = FlowMatchingPolicy(
        debug_config(image_size=[IMAGE, IMAGE], chunk_size=args.chunk, num_steps=args.steps)
    )
    with tempfile.TemporaryDirectory() as tmp:
        smol = make_tiny_smolvla(
            tmp,
            chunk_size=args.chunk,
            action_dim=ACTION,
            state_dim=STATE,
            cameras=CAMERAS,
            image_size=IMAGE,
            num_steps=args.steps,
        )
        o_train, o_sample, o_params = measure(ours, batch, obs, args.steps)
        s_train, s_sample, s_params = measure(smol, batch, obs, args.steps)
    rows = [
        ("ours (flow_matching)", o_params, o_train, o_sample),
        ("LeRobot SmolVLA (tiny)", s_params, s_train, s_sample),
    ]
    print(
        f"batch {args.batch}, chunk {args.chunk}, K={args.steps}, 2 cameras {IMAGE}x{IMAGE}, "
        f"{args.threads} thread(s)"
    )
    print(f"{'policy':<24} {'params':>9} {'train step ms':>14} {'sample ms':>10}")
    for name, n, tr, sa in rows:
        print(f"{name:<24} {n:>9,} {1e3 * tr:>14.1f} {1e3 * sa:>10.1f}")
    path = write_result(
        "policy_speed",
        {
            "batch": args.batch,
            "chunk": args.chunk,
            "num_steps": args.steps,
            "ours": {"params": o_params, "train_step_s": o_train, "sample_s": o_sample},
            "smolvla": {"params": s_params, "train_step_s": s_train, "sample_s": s_sample},
            "train_step_ratio_smolvla_over_ours": s_train / o_train,
            "sample_ratio_smolvla_over_ours": s_sample / o_sample,
        },
    )
    print(f"results: {path}")
    print(f"train-step time ratio (SmolVLA / ours): {s_train / o_train:.2f}")
    print(f"sampling latency ratio (SmolVLA / ours): {s_sample / o_sample:.2f}")


if __name__ == "__main__":
    main()
