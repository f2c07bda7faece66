"""Sampling cost of our flow-matching VLA: classifier-free guidance against unguided sampling (goal <= 1.3x),
and the prefix key/value cache against re-encoding the prefix every step.

    python benchmarks/sampling_cost.py [--preset default|sft] [--threads 2]

``default`` is FlowMatchingConfig() (96x96, H = 50, K = 10); ``sft`` the SFT benchmark's policy. Prints
``CFG cost (guided / unguided): x`` and ``KV cache speed-up (uncached / cached): x`` last; writes
benchmarks/results/sampling_cost_<preset>.json.
"""

from __future__ import annotations

import argparse

import torch
from _timing import fake_obs, median_seconds, write_result

from policies.flow_matching import FlowMatchingConfig, FlowMatchingPolicy

PRESETS = {
    "default": {},
    "sft": dict(chunk_size=20, d_model=128, n_prefix_layers=2, d_expert=128, n_expert_layers=2),
}


INTERVAL = (0.2, 0.7)  # CFG on the middle half of the K steps (Kynkaanniemi et al. 2024)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), default="default")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = FlowMatchingConfig(**PRESETS[args.preset])
    policy = FlowMatchingPolicy(cfg).eval()
    with torch.no_grad():
        policy.model.cond_emb.weight.normal_()
    obs = fake_obs(cfg.cameras, cfg.image_size, cfg.state_dim, 1)
    noise = torch.randn(1, cfg.chunk_size, cfg.action_dim)
    cond = torch.ones(1, dtype=torch.long)
    r = args.repeats
    plain = median_seconds(lambda: policy.sample_chunk(obs, noise=noise), r)
    conditioned = median_seconds(lambda: policy.sample_chunk(obs, noise=noise, cond=cond), r)
    guided = median_seconds(lambda: policy.sample_chunk(obs, noise=noise, cond=cond, guidance=2.0), r)
    lo, hi = INTERVAL
    policy.config.guidance_interval = INTERVAL
    interval = median_seconds(lambda: policy.sample_chunk(obs, noise=noise, cond=cond, guidance=2.0), r)
    policy.config.guidance_interval = (0.0, 1.0)
    uncached = median_seconds(lambda: policy.sample_chunk(obs, noise=noise, use_cache=False), r)
    print(
        f"preset {args.preset}: H={cfg.chunk_size}, K={cfg.num_steps}, "
        f"{cfg.image_size[0]}x{cfg.image_size[1]}, "
        f"{sum(x.numel() for x in policy.parameters()):,} params, {args.threads} thread(s), batch 1"
    )
    for name, t in [
        ("unguided", plain),
        ("conditioned (I = 1)", conditioned),
        ("CFG beta = 2", guided),
        (f"CFG beta = 2, tau in [{lo}, {hi})", interval),
        ("uncached (prefix every step)", uncached),
    ]:
        print(f"{name:<30} {1e3 * t:8.1f} ms")
    path = write_result(
        f"sampling_cost_{args.preset}",
        {
            "preset": args.preset,
            "unguided_s": plain,
            "conditioned_s": conditioned,
            "cfg_s": guided,
            "uncached_s": uncached,
            "cfg_ratio": guided / conditioned,
            "cfg_interval": list(INTERVAL),
            "cfg_interval_s": interval,
            "cfg_interval_ratio": interval / conditioned,
            "kv_speedup": uncached / plain,
        },
    )
    print(f"results: {path}")
    print(f"KV cache speed-up (uncached / cached): {uncached / plain:.2f}")
    print(f"CFG cost, every step (guided / unguided): {guided / conditioned:.2f}")
    print(f"CFG cost, guidance interval {list(INTERVAL)} (guided / unguided): {interval / conditioned:.2f}")


if __name__ == "__main__":
    main()
