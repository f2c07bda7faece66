"""training/compare/credit_share.py: frames grouped by the data design, and each method's signal read the way
its actor reads it (HABC's per-batch weights recomputed, its dataset variant's stored weights used)."""

import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import save_file

from training.compare.credit_share import credit_shares, frame_groups, signal
from vla.data.reader import read_episode_info

sys.path.insert(0, str(Path(__file__).resolve().parent))
from toy_episodes import write_toy_episodes


@pytest.fixture(scope="module")
def design(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("share")
    demos = write_toy_episodes(tmp / "demos", n=6, seed=1, source="scripted")
    rollouts = write_toy_episodes(tmp / "rollouts", n=8, seed=2)
    return [demos, rollouts], ["demos", "rollouts"]


def test_frame_groups_follow_outcomes_takeovers_and_the_episode_cap(design):
    roots, names = design
    groups = frame_groups(roots, names, max_episodes=4)
    demos, rollouts = (read_episode_info(r)[:4] for r in roots)
    assert len(groups) == sum(i.length for i in demos) + sum(i.length for i in rollouts)
    n_demo = sum(i.length for i in demos)
    assert groups[: demos[0].length] == ["demos ok"] * demos[0].length  # episode 0 succeeds
    assert set(groups[:n_demo]) == {"demos ok", "demos failed"}  # demos have takeover flags, never "human"
    # rollout episode 0 succeeds with a takeover in its second half: those frames are "rollouts human"
    first = groups[n_demo : n_demo + rollouts[0].length]
    half = rollouts[0].length // 2
    assert first == ["rollouts ok"] * half + ["rollouts human"] * (rollouts[0].length - half)
    assert groups.count("rollouts failed") == rollouts[1].length + rollouts[3].length


def _habc_labels(n: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "a_v": torch.randn(n, generator=g),
        "a_e": torch.randn(n, generator=g),
        "gate": torch.rand(n, generator=g),
        "human": torch.zeros(n, dtype=torch.bool),
        "weight": torch.full((n,), 7.0),
    }


def test_habc_signal_follows_the_critic_config_not_the_labels_present():
    labels = _habc_labels(64)
    stored = signal(labels, "habc", {"standardise": "dataset", "beta": 0.5}, batch=16)
    assert torch.equal(stored, labels["weight"])
    per_batch = signal(labels, "habc", {"standardise": "batch", "beta": 0.5, "w_max": 20.0}, batch=16)
    assert not torch.allclose(per_batch, labels["weight"])
    a_hat = (1 - labels["gate"]) * labels["a_v"] + labels["gate"] * labels["a_e"]
    top, bottom = a_hat.argsort()[-8:], a_hat.argsort()[:8]
    assert per_batch[top].mean() > 3 * per_batch[bottom].mean()  # higher advantage, more weight
    assert per_batch.mean() == pytest.approx(1.0, abs=0.35)  # per-batch weights have mean 1


def test_credit_shares_read_the_stored_labels_and_name_a_mismatch(design, tmp_path):
    roots, names = design
    groups = frame_groups(roots, names, max_episodes=4)
    cond = torch.tensor([g.endswith(" ok") for g in groups], dtype=torch.bool)
    labels_dir = tmp_path / "recap" / "round_1" / "train" / "critic"
    labels_dir.mkdir(parents=True)
    save_file({"cond": cond}, str(labels_dir / "labels.safetensors"))
    shares = credit_shares(tmp_path / "recap", roots, names, 4, "recap", batch=16)
    assert sum(v["frames"] for v in shares.values()) == pytest.approx(100.0)
    assert shares["demos failed"]["signal"] == 0.0 and shares["rollouts human"]["signal"] == 0.0
    ok = [g for g in shares if g.endswith(" ok")]
    assert sum(shares[g]["signal"] for g in ok) == pytest.approx(100.0)
    # weights relative to the mean over all frames: an imitated frame counts 1 / (share of imitated frames)
    assert shares["demos ok"]["mean_w"] == pytest.approx(len(groups) / int(cond.sum()))
    assert shares["demos failed"]["w_q90"] == 0.0
    assert sum(v["mean_w"] * v["frames"] / 100 for v in shares.values()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"recap.*labelled frames"):
        credit_shares(tmp_path / "recap", roots, names, 3, "recap", batch=16)


@pytest.mark.parametrize("standardise", ["batch", "dataset"])
def test_habc_shares_follow_the_config_its_critic_stored(design, tmp_path, standardise):
    """The preset leaves T_max unset (the task fills it in when the critic is fitted): the shares read the
    stored critic's config, so a preset with ``t_max: null`` is no error, and its ``standardise`` decides."""
    roots, names = design
    n = len(frame_groups(roots, names, max_episodes=4))
    folder = tmp_path / "habc" / "round_2" / "train" / "critic"
    folder.mkdir(parents=True)
    labels = _habc_labels(n)
    save_file(labels, str(folder / "labels.safetensors"))
    reward = {"c_fail": 300.0, "t_max": 80}
    config = {"beta": 0.5, "w_max": 20.0, "standardise": standardise, "reward": reward}
    (folder / "critic.yaml").write_text(yaml.safe_dump({"type": "habc", "config": config}))
    shares = credit_shares(tmp_path / "habc", roots, names, 4, "habc", batch=16, round_=2)
    assert sum(v["signal"] for v in shares.values()) == pytest.approx(100.0)
    flat = all(v["signal"] == pytest.approx(v["frames"]) for v in shares.values())
    assert flat == (standardise == "dataset")  # stored weights are all 7.0: the frames' shares exactly
