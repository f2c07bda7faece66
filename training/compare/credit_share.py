"""Where a credit method's actor signal goes: the share of it on each part of the data design.

A diagnosis for a comparison (``vla-compare``), read from the labels a method's critic stored in a round
(``<arm>/round_<r>/train/critic/labels.safetensors``, one row per training frame in the order the training
data loads them: the data roots, then rounds 1..r's rollouts, the first ``max_episodes`` of each).

- weight methods (AWBC, ALOE, HABC): the share of the total per-frame weight on each group. HABC's
  weights are standardised per batch (the spec), so they are recomputed here over random batches of the
  training batch size and averaged per frame; ALOE's are those of its critic at the start of actor
  training (its online critic moves them afterwards);
- RECAP: the share of the I = 1 frames (the ones the positive-conditioned policy imitates);
- APO: the share of the draws (its batches are balanced between desirable and undesirable frames; it
  moves the policy toward the first and away from the second, so its undesirable share is a push away);
- Flow-DPO: every frame alike (it trains on chunks of its own at each frame, not on the data's).

Beside each share, the group's share of the frames: a signal share below the frame share means the method
imitates that group less than SFT continued does; filtered BC gives failed episodes zero. And the spread of
the per-frame weight within each group (relative to the mean over all frames: 1 = what SFT continued gives
every frame): its mean and its 10/50/90% quantiles. A group whose weights sit in a narrow band near 1 is not
told apart from the rest, however its share looks.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from training.critics import HABCConfig, critic_config, read_critic_config
from training.critics.base import CRITIC_CONFIG
from training.critics.targets import habc_weights
from vla.data.reader import iter_episodes, read_episode_info
from vla.data.schema import IS_INTERVENTION


def frame_groups(roots: list[Path], names: list[str], max_episodes: int | None) -> list[str]:
    """One group name per training frame: ``<name> ok|failed``, rollouts' takeover frames as ``human``."""
    groups: list[str] = []
    for root, name in zip(roots, names, strict=True):
        infos = read_episode_info(root)[:max_episodes]
        human: dict[int, list[bool]] = {}
        if name == "rollouts":
            for index, ep in iter_episodes(root, [i.episode_index for i in infos], keys=[IS_INTERVENTION]):
                human[index] = ep[IS_INTERVENTION].reshape(-1).astype(bool).tolist()
        for info in infos:
            outcome = "ok" if info.success else "failed"
            flags = human.get(info.episode_index, [False] * info.length)
            groups += [f"{name} human" if h else f"{name} {outcome}" for h in flags]
    return groups


def signal(labels: dict[str, torch.Tensor], algo: str, critic: dict, batch: int) -> torch.Tensor:
    """Each frame's share of the actor's signal (unnormalised), read as the actor reads it. [N]

    What the actor trains on is chosen by the critic's config, not by which labels happen to be stored:
    HABC with ``standardise: batch`` (the spec) forms its weights per batch from ``a_v``/``a_e``, so they are
    recomputed here; with ``standardise: dataset`` it trains on the stored ``weight``.
    """
    if algo == "recap":
        return labels["cond"].float()
    if algo == "flow_dpo":  # every frame alike: it trains on its own chosen / rejected chunks there
        return torch.ones(len(labels["chosen"]))
    typed = critic_config("habc", critic) if algo == "habc" else None  # as the actor reads it, defaults too
    if isinstance(typed, HABCConfig) and typed.standardise == "batch":
        beta, w_max = float(typed.beta), float(typed.w_max)
        n = len(labels["a_v"])
        g = torch.Generator().manual_seed(0)
        total, count = torch.zeros(n), torch.zeros(n)
        for _ in range(max(1, 50 * n // batch)):
            idx = torch.randint(n, (batch,), generator=g)
            w = habc_weights(
                labels["a_v"][idx], labels["a_e"][idx], labels["gate"][idx], labels["human"][idx], beta, w_max
            )
            total.index_add_(0, idx, w)
            count.index_add_(0, idx, torch.ones(batch))
        return total / count.clamp(min=1)
    return labels["weight"].float()


def credit_shares(
    arm_out: Path,
    roots: list[Path],
    names: list[str],
    max_episodes: int | None,
    algo: str,
    batch: int,
    round_: int = 1,
) -> dict[str, dict[str, float]]:
    """``{group: {"frames": %, "signal": %, "mean_w", "w_q10", "w_q50", "w_q90"}}``: the group's share of the
    frames and of the actor's signal in round ``round_`` (``roots``: its training data, in order), and its
    frames' weights relative to the mean over all frames. The critic's config is the one the round's critic
    stored (``critic.yaml``: what it was fitted with, the task's T_max filled in), not the preset's."""
    train = arm_out / f"round_{round_}" / "train"
    critic_dir = train / "critic"
    folder = critic_dir if critic_dir.is_dir() else train / "preference"  # APO: no critic
    labels = load_file(str(folder / "labels.safetensors"))
    groups = frame_groups(roots, names, max_episodes)
    critic = read_critic_config(critic_dir)["config"] if (critic_dir / CRITIC_CONFIG).is_file() else {}
    s = signal(labels, algo, critic, batch)
    if len(s) != len(groups):
        raise ValueError(f"{arm_out}: {len(s)} labelled frames, the data design has {len(groups)}")
    out: dict[str, dict[str, float]] = {}
    w = s / s.mean().clamp(min=1e-12)  # per-frame weight relative to the mean over all frames
    for name in sorted(set(groups)):
        mask = torch.tensor([g == name for g in groups])
        q10, q50, q90 = torch.quantile(w[mask], torch.tensor([0.1, 0.5, 0.9])).tolist()
        out[name] = {
            "frames": 100 * float(mask.float().mean()),
            "signal": 100 * float(s[mask].sum() / s.sum().clamp(min=1e-12)),
            "mean_w": float(w[mask].mean()),
            "w_q10": q10,
            "w_q50": q50,
            "w_q90": q90,
        }
    return out
