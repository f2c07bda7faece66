"""The training loop: vla-train experiment=debug, exact resume, SFT learning, config errors."""

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from policies.flow_matching import debug_config
from sim.collect import CollectConfig, collect
from sim.env import EnvConfig
from training.config import TrainConfig
from training.data import ChunkDataset, DataConfig
from training.loop import Trainer, build_policy
from vla.checks import check_checkpoint

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def reach_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data") / "reach"
    collect(
        CollectConfig(
            task="reach", episodes=3, out=str(root), progress=False, env=EnvConfig(image_size=(32, 32))
        )
    )
    return root


def _train(args, cwd):
    res = subprocess.run(
        [str(BIN / "vla-train"), *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def test_vla_train_debug_then_resume_continues_the_same_run(reach_data, tmp_path):
    common = ["experiment=debug", f"data.roots=[{reach_data}]", "steps=12", "save_every=4", "progress=false"]
    _train([*common, f"out={tmp_path / 'straight'}", "keep_last=2"], tmp_path)
    ckpts = tmp_path / "straight/checkpoints"
    assert sorted(p.name for p in ckpts.iterdir()) == ["000008", "000012", "last"]  # the newest 2 steps
    assert not (ckpts / "000012/train_state").exists()  # deployable: weights, config, stats, deploy.yaml
    check_checkpoint(ckpts / "000008")
    assert (ckpts / "000012/model.safetensors").read_bytes() == (
        ckpts / "last/model.safetensors"
    ).read_bytes()
    first = _train([*common, f"out={tmp_path / 'split'}", "stop_after=6"], tmp_path)
    assert "resuming" not in first
    second = _train([*common, f"out={tmp_path / 'split'}"], tmp_path)
    assert "at step 6" in second
    a = load_file(str(tmp_path / "straight/checkpoints/last/model.safetensors"))
    b = load_file(str(tmp_path / "split/checkpoints/last/model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (tmp_path / "split/checkpoints/last/train_state/state.json").exists()
    assert json.loads((tmp_path / "split/checkpoints/last/upcycling.json").read_text())["tau"] > 0
    assert list((tmp_path / "split/tb").iterdir())  # TensorBoard events


def test_sft_loss_falls_through_the_loop(reach_data, tmp_path):
    cfg = TrainConfig(
        policy=asdict(debug_config()),
        data=DataConfig(roots=[str(reach_data)]),
        out=str(tmp_path),
        steps=80,
        batch_size=16,
        threads=1,
        progress=False,
        save_every=1000,
    )
    cfg.optim.lr, cfg.optim.warmup_steps = 1e-3, 5
    trainer = Trainer(cfg)
    losses = []
    for _ in range(80):
        batch = trainer.data.sample(16, trainer.data_gen)
        losses.append(trainer.algo.update(batch)["loss"])
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:10]) / 10


def test_chunks_are_padded_past_the_episode_end(reach_data):
    data = ChunkDataset(DataConfig(roots=[str(reach_data)], random_shift=0), ["agentview", "wrist"], 8, False)
    last = int(data.episode_end[0]) - 1
    batch = data.get(torch.tensor([last]))
    assert batch["action_is_pad"][0, 0].item() is False and batch["action_is_pad"][0, 1:].all()
    assert torch.equal(batch["action"][0, 1], batch["action"][0, 0])  # last action repeated
    assert batch["observation.images.agentview"].shape == (1, 3, 32, 32)


def test_config_errors_name_the_field():
    with pytest.raises(KeyError, match="unknown field"):
        build_policy({"type": "flow_matching", "d_modle": 3}, None)
    with pytest.raises(KeyError, match="unknown policy 'nope'"):
        build_policy({"type": "nope"}, None)
    with pytest.raises(ValueError, match=r"data\.roots is empty"):
        ChunkDataset(DataConfig(roots=[]), ["agentview"], 8)


def test_periodic_evaluation_in_sim_through_the_runner_seam(reach_data, tmp_path):
    out = tmp_path / "run"
    stdout = _train(
        [
            "experiment=debug",
            f"data.roots=[{reach_data}]",
            "steps=4",
            "progress=false",
            f"out={out}",
            "env=sim",
            "env.task=reach",
            "env.episodes=2",
            "env.workers=0",
            "env.every=2",
        ],
        tmp_path,
    )
    assert stdout.count("eval: success_rate=") == 2  # at step 2 and step 4
    reports = sorted((out / "eval").glob("step_*/eval.json"))
    assert [p.parent.name for p in reports] == ["step_0000002", "step_0000004"]


def test_vla_train_runs_a_lerobot_pi05_adapter(reach_data, tmp_path):
    """policy=pi05 (LeRobot's PI05Pytorch at toy sizes, a local tokenizer) through the same Hydra loop."""
    from policies.pi0.tiny import TINY_VLM, build_tiny_paligemma_tokenizer, tiny_size_overrides
    from vla.policy import load_policy

    tok = build_tiny_paligemma_tokenizer(tmp_path / "tok")
    _train(
        [
            "experiment=debug",
            "policy=pi05",
            f"policy.tokenizer_path={tok}",
            *tiny_size_overrides(),
            "policy.image_size=[32,32]",
            "policy.chunk_size=8",
            "policy.num_steps=2",
            f"data.roots=[{reach_data}]",
            "steps=3",
            "save_every=3",
            "batch_size=4",
            "progress=false",
            f"out={tmp_path / 'run'}",
        ],
        tmp_path,
    )
    policy = load_policy(tmp_path / "run/checkpoints/last")
    assert policy.config.type == "pi05" and policy.config.vlm == TINY_VLM
    data = ChunkDataset(DataConfig(roots=[str(reach_data)]), ["agentview", "wrist"], 8, False)
    batch = data.sample(2, torch.Generator().manual_seed(0))
    assert policy.sample_chunk(batch).shape == (2, 8, policy.action_dim)
