"""HG-DAgger (``algo=hg_dagger``): which frames it keeps, the chunk steps it masks, its presets, and a
learning test on the toy task with takeovers (``takeovers.py``): it moves the policy to the operator's
action at the states where the operator took over, where SFT continued keeps the policy's habit."""

import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from policies.flow_matching import FlowMatchingPolicy, debug_config
from training.algorithms import ALGORITHMS, OptimConfig
from training.algorithms.hg_dagger import KEPT
from training.data import ChunkDataset, DataConfig
from vla.batch import ACTION
from vla.policy import load_policy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from takeovers import BAD, GOOD, write_patterns, write_takeovers
from two_modes import fast_fraction, train_toy

CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "configs")
EPISODES = [  # (pattern: p policy frame, h takeover frame; success; source) -> the frames kept
    (("pppp", True, "demo"), "kkkk"),
    (("pppp", False, "demo"), "...."),  # a failed demo: not expert data
    (("ppppp", True, "policy"), "kkkkk"),  # a successful autonomous episode
    (("ppppp", False, "policy"), "....."),
    (("ppphhpp", True, "policy"), "...kk.."),  # successful after a takeover: the operator's frames only
    (("pphhppphhp", False, "policy"), "..kk...kk."),  # a takeover's frames count whatever the outcome
]


@pytest.fixture()
def prepared(tmp_path):
    root = write_patterns(tmp_path / "data", [e for e, _ in EPISODES])
    data = ChunkDataset(DataConfig(roots=[str(root)], random_shift=0), ["agentview", "wrist"], 4, False)
    policy = FlowMatchingPolicy(debug_config(chunk_size=4), data.stats())
    algo = ALGORITHMS.get("hg_dagger")(policy, OptimConfig(), 10)
    summary = algo.prepare(data, tmp_path / "out", progress=False)
    return data, algo, summary


def test_it_keeps_takeovers_successful_autonomous_episodes_and_successful_demos(prepared):
    data, _, summary = prepared
    for e, (_, kept) in enumerate(EPISODES):
        weights = data.sampling_weights[data.episode_frames(e)]
        assert "".join("k" if w > 0 else "." for w in weights) == kept, e
    assert summary == {"kept": 15.0, "takeover": 6.0, "dropped": 20.0}
    assert ALGORITHMS.get("hg_dagger").label_needs({"name": "hg_dagger"}) == (True, True)


def test_a_chunk_that_runs_past_a_handback_learns_only_the_operator_steps(prepared):
    data, algo, _ = prepared
    i = data.episode_frames(4).start + 3  # the first takeover frame of "ppphhpp": chunk h h p p
    assert data.labels[KEPT][i].tolist() == [True, True, False, False]
    batch = data.get(torch.tensor([i]))

    def loss(actions):
        algo.generator.manual_seed(0)
        with torch.no_grad():
            return float(algo.loss({**batch, ACTION: actions}))

    policy_steps, operator_steps = batch[ACTION].clone(), batch[ACTION].clone()
    policy_steps[:, 2:] += 1.0
    operator_steps[:, 1] += 1.0
    assert loss(policy_steps) == loss(batch[ACTION]) != loss(operator_steps)


def test_the_presets():
    import training.scripts.train  # noqa: F401  (registers train_schema)

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        sft = compose("train", overrides=["experiment=posttrain_sft"])
        hg = compose("train", overrides=["experiment=posttrain_hg_dagger"])
        filtered = compose("train", overrides=["experiment=posttrain_filtered_bc"])
    assert hg.algo.name == "hg_dagger" and not hg.data.only_success
    assert filtered.algo.name == "sft" and filtered.data.only_success
    for cfg in (hg, filtered):  # everything else as the other post-training presets
        for key in ("optim", "steps", "batch_size", "env", "deploy", "loop", "post_training"):
            assert cfg[key] == sft[key], key


def test_hg_dagger_moves_the_policy_to_the_operator_where_it_took_over(tmp_path):
    """Every toy episode succeeds, so filtered BC is SFT here, and both keep the policy's habit (v = -0.05
    for 5 frames) that the operator then corrects (+0.2). Share of good first actions at a takeover state
    (p = -0.2) and the start states, 80 steps from a 100-step base (5 demos, 10 takeover episodes), measured:
    base 0.73, SFT continued 0.70, HG-DAgger 0.99."""
    root = write_takeovers(tmp_path / "data", demos=5, takeovers=10)
    base = train_toy(root, tmp_path / "base", {"name": "sft"}, steps=100)
    hg = train_toy(root, tmp_path / "hg", {"name": "hg_dagger"}, steps=80, init_from=base)
    good = lambda ckpt: fast_fraction(  # noqa: E731
        load_policy(ckpt), positions=(-0.2, 0.0, 0.05), threshold=(GOOD + BAD) / 2
    )
    before, after = good(base), good(hg)
    assert after >= max(before + 0.2, 0.9), (after, before)
