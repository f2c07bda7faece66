"""Offline replay of a dataset through a fitted critic: value and advantage along each episode, human
intervention segments shaded, written as one PNG (``vla-replay dataset=<dir> critic=<critic folder>``).

A critic folder (``<train out>/critic``) holds the critic's weights and config and the policy whose
features it reads (``policy/``), so it is self-contained.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

import policies  # noqa: F401  (registers the policies)
from training.critics import CRITICS, load_critic_weights, read_critic_config
from training.data import ChunkDataset, DataConfig
from vla.policy import load_policy

FEATURE_POLICY_DIR = "policy"


def critic_labels(dataset: str | Path, critic_dir: str | Path, progress: bool = True):
    """(ChunkDataset of ``dataset``, per-frame labels of the critic at ``critic_dir``)."""
    critic_dir = Path(critic_dir)
    meta = read_critic_config(critic_dir)
    policy_dir = critic_dir / FEATURE_POLICY_DIR
    policy = load_policy(policy_dir) if policy_dir.is_dir() else None
    cfg_cls = CRITICS.get(meta["type"]).config_class
    cfg = cfg_cls(**meta["config"])
    cameras = list(getattr(getattr(policy, "config", None), "cameras", None) or meta.get("cameras", []))
    chunk = int(getattr(policy, "chunk_size", 0) or meta.get("chunk_size", 1))
    data = ChunkDataset(DataConfig(roots=[str(dataset)], random_shift=0), cameras, chunk, progress=progress)
    episodes = data.episodes
    unknown = sum(m.success is None for m in episodes)
    if unknown:  # a plain LeRobot dataset without outcomes: the values need none, the targets one
        print(
            f"{dataset}: success unknown for {unknown} episode(s) (no next.success / next.reward column): "
            "their advantages near the end are computed as for failures; the values are the critic's own"
        )
        data.episodes = [dataclasses.replace(m, success=bool(m.success)) for m in episodes]
    critic = CRITICS.get(meta["type"])(cfg, data, policy, progress=progress)
    data.episodes = episodes  # the plots say "outcome unknown"
    load_critic_weights(critic, critic_dir).eval()
    with torch.no_grad():
        labels = critic.label()
    return data, labels


def plot_credit(
    data: ChunkDataset, labels: dict[str, torch.Tensor], path: str | Path, episodes: int = 8
) -> Path:
    """One panel per episode: value (left axis) and advantage (right axis) over time; human frames shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = min(episodes, data.num_episodes)
    cols = 2 if n > 1 else 1
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 2.4 * rows), dpi=110, squeeze=False)
    value = labels["value"].numpy()
    adv = labels.get("advantage", torch.zeros_like(labels["value"])).numpy()
    for e in range(rows * cols):
        ax = axes[e // cols][e % cols]
        if e >= n:
            ax.axis("off")
            continue
        sl = data.episode_frames(e)
        t = np.arange(sl.stop - sl.start)
        human = data.is_intervention[sl].numpy()
        for start, stop in _runs(human):
            ax.axvspan(start - 0.5, stop - 0.5, color="orange", alpha=0.25, lw=0)
        ax.plot(t, value[sl], color="tab:blue", label="value")
        ax.set_ylabel("value", color="tab:blue")
        ax2 = ax.twinx()
        ax2.plot(t, adv[sl], color="tab:green", lw=1, label="advantage")
        ax2.axhline(0, color="tab:green", lw=0.5, ls=":")
        ax2.set_ylabel("advantage", color="tab:green")
        meta = data.episodes[e]
        outcome = {True: "success", False: "failure", None: "outcome unknown"}[meta.success]
        ax.set_title(
            f"episode {meta.episode_index} ({meta.source}): {outcome}"
            + (f", {int(human.sum())} human frames (shaded)" if human.any() else ""),
            fontsize=9,
        )
        ax.set_xlabel("frame")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) ranges where ``mask`` is True."""
    out, start = [], None
    for i, m in enumerate(list(mask) + [False]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append((start, i))
            start = None
    return out


def replay_through_critic(dataset: str, critic: str, out: str | None, episodes: int = 8) -> Path:
    data, labels = critic_labels(dataset, critic)
    path = Path(out or Path(critic) / "credit.png")
    plot_credit(data, labels, path, episodes)
    v = labels["value"]
    ok = torch.tensor([m.success is True for m in data.episodes])[data.episode_id]
    failed = torch.tensor([m.success is False for m in data.episodes])[data.episode_id]
    if ok.any() and failed.any():
        print(f"mean value: success {float(v[ok].mean()):.3f}, failure {float(v[failed].mean()):.3f}")
    return path
