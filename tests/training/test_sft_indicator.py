"""``algo=sft`` with ``algo.indicator=success``: the base pi*0.6's RECAP starts from, trained with the
advantage indicator I = the episode's success present (dropped with ``policy.cond_dropout``). On a toy
where successful episodes act with one velocity and failed ones with the opposite, such a base samples the
successful mode more often under I = 1 than under I = 0; plain SFT (``indicator=none``) leaves the
indicator at zero."""

import sys
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from policies.flow_matching import debug_config
from training.algorithms.base import OptimConfig
from training.algorithms.sft import SFT
from training.config import TrainConfig
from training.data import DataConfig
from training.loop import Trainer
from vla.data import EpisodeWriter
from vla.errors import InputError
from vla.policy import load_policy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from toy_episodes import SPEC, toy_frame

V = 0.2  # successful episodes act +V on every dim, failed ones -V, from the same states
STEPS = 120


def _write(root: Path, episodes: int = 24, length: int = 10, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    grey = np.full((32, 32, 3), 128, np.uint8)
    with EpisodeWriter(root, SPEC, durable=False) as w:
        for e in range(episodes):
            success = e % 2 == 0
            for t in range(length):
                state = rng.normal(0, 0.01, 8).astype(np.float32)
                state[0] = rng.uniform(0.0, 1.0)
                noise = rng.normal(0, 0.01, 8).astype(np.float32)
                action = np.full(8, V if success else -V, np.float32) + noise
                done = t == length - 1
                w.add_frame(toy_frame(grey, state, action, False, float(success and done), done, "toy task"))
            w.end_episode(success=success, source="demo")
    return root


def _train(root: Path, out: Path, indicator: str) -> Path:
    cfg = TrainConfig(
        policy=asdict(debug_config(chunk_size=4)),
        algo={"name": "sft", "indicator": indicator},
        data=DataConfig(roots=[str(root)], random_shift=0),
        out=str(out),
        steps=STEPS,
        batch_size=32,
        threads=1,
        progress=False,
        save_every=STEPS,
        log_every=STEPS,
    )
    cfg.optim.lr = 1e-3
    cfg.optim.warmup_steps = 20
    return Trainer(cfg).run()


def _positive_share(policy, cond: int, samples: int = 64, seed: int = 0) -> float:
    """Share of the first actions sampled under I = ``cond`` that go the successful way (> 0)."""
    gen = torch.Generator().manual_seed(seed)
    policy.eval()
    hits = 0
    positions = (0.2, 0.5, 0.8)
    for p in positions:
        state = torch.zeros(samples, 8)
        state[:, 0] = p
        grey = torch.full((samples, 3, 32, 32), 128 / 255.0)
        obs = {"observation.state": state, "observation.images.agentview": grey,
               "observation.images.wrist": grey, "task": ["toy task"] * samples}  # fmt: skip
        with torch.no_grad():
            chunk = policy.sample_chunk(obs, cond=torch.full((samples,), cond), generator=gen)  # [S, H, A]
        hits += int((chunk[:, 0].mean(-1) > 0).sum())
    return hits / (samples * len(positions))


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("indicator")
    root = _write(tmp / "data")
    return {ind: load_policy(_train(root, tmp / ind, ind)) for ind in ("success", "none")}


def test_the_base_learns_the_success_indicator(bases):
    policy = bases["success"]
    assert policy.config.inference_cond is None  # the base deploys unconditioned
    shares = {c: _positive_share(policy, c) for c in (0, 1)}
    assert shares[1] >= shares[0] + 0.3, shares  # measured: 0.98 under I = 1, 0.02 under I = 0


def test_plain_sft_leaves_the_indicator_at_zero(bases):
    policy = bases["none"]
    assert float(policy.model.cond_emb.weight.detach().abs().max()) == 0.0
    assert _positive_share(policy, 1) == _positive_share(policy, 0)  # the same noise: cond has no effect


def test_indicator_refused_on_unknown_success_and_unknown_values(tmp_path):
    with pytest.raises(ValueError, match=r"algo\.indicator='reward': use one of none, success"):
        SFT.make_config({"indicator": "reward"})

    # a loaded plain dataset without outcomes (vla-train refuses it before loading: test_plain_datasets)
    plain = SimpleNamespace(episode_roots=[str(tmp_path / "plain")], episodes=[SimpleNamespace(success=None)])
    sft = SFT(nn.Sequential(nn.Linear(2, 2)), OptimConfig(), total_steps=1, config={"indicator": "success"})
    refusal = r"plain: algo=sft algo\.indicator=success needs episode success"
    with pytest.raises(InputError, match=refusal) as e:
        sft.prepare(plain, tmp_path)
    assert "\n" not in str(e.value)
