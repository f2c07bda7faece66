"""The LIBERO presets for pretrained VLAs end to end at tiny size on the CPU: a LeRobot SmolVLA checkpoint
(tiny, written by LeRobot's own API) fine-tuned on converted LIBERO demos and evaluated per task in LIBERO
(``experiment=libero_smolvla_sft``), then post-trained with RECAP in a closed-loop round whose rollouts run
in LIBERO (``experiment=libero_smolvla_recap``)."""

import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from sim.libero.convert import convert
from vla.hydra_utils import CONFIG_DIR

pytest.importorskip("libero.libero", reason="the libero extra is not installed (make setup installs it)")

BIN = Path(sys.executable).parent
SOUP = "pick_up_the_alphabet_soup_and_place_it_in_the_basket"
TINY = [
    "policy.image_size=[32,32]",
    "policy.chunk_size=8",
    "policy.num_steps=2",
    "policy.num_vlm_layers=2",
    "policy.tokenizer_max_length=24",
]
LIBERO_SMALL = [
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


@pytest.mark.parametrize("model", ["smolvla", "pi05"])
@pytest.mark.parametrize("stage", ["sft", "recap", "apo", "filtered_bc"])
def test_the_presets_compose_for_libero(model, stage):
    import training.scripts.train  # noqa: F401  (registers train_schema)

    local = {"smolvla": ["policy.vlm_model_name=/m"], "pi05": ["policy.tokenizer_path=/t"]}[model]
    extra = [*local, "policy.pretrained_path=/p"] if stage == "sft" else ["init_from=/base"]
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        cfg = compose("train", overrides=[f"experiment=libero_{model}_{stage}", *extra])
    typed = OmegaConf.to_object(cfg)
    assert typed.env.runner == "libero" and typed.env.module == "sim.libero.runner" and typed.env.task is None
    if stage == "sft":
        assert typed.policy["cameras"] == ["image", "image2"] and typed.policy["action_dim"] == 7
        assert typed.algo["indicator"] == "success"
    else:
        assert typed.post_training and typed.loop.teleop["enabled"] == (stage == "apo")  # APO needs takeovers


def _demos(tmp: Path) -> Path:
    """Three demos of libero_object's task 0 in LIBERO's HDF5 layout, converted."""
    rng = np.random.default_rng(0)
    path = tmp / f"{SOUP}_demo.hdf5"
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["problem_info"] = json.dumps({"language_instruction": SOUP.replace("_", " ")})
        for i in range(3):
            g = data.create_group(f"demo_{i}")
            g.create_dataset("actions", data=np.c_[rng.uniform(-0.5, 0.5, (12, 6)), -np.ones(12)])
            obs = g.create_group("obs")
            for cam in ("agentview_rgb", "eye_in_hand_rgb"):
                obs.create_dataset(cam, data=rng.integers(0, 255, (12, 32, 32, 3), dtype=np.uint8))
            obs.create_dataset("ee_pos", data=rng.normal(0, 0.1, (12, 3)))
            obs.create_dataset("ee_ori", data=rng.normal(0, 1.0, (12, 3)))
            obs.create_dataset("gripper_states", data=rng.uniform(0, 0.04, (12, 2)))
    return convert([path], tmp / "demos")[0]


def _lerobot_smolvla(tmp: Path) -> tuple[Path, Path]:
    """A tiny LeRobot SmolVLA checkpoint for LIBERO's inputs (and its tiny offline backbone)."""
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy
    from lerobot.policies.smolvla.processor_smolvla import make_smolvla_pre_post_processors

    from policies.smolvla.tiny import build_tiny_smolvlm, tiny_stats

    backbone = build_tiny_smolvlm(tmp / "smolvlm", texts=[SOUP.replace("_", " ")])
    image = PolicyFeature(type=FeatureType.VISUAL, shape=(3, 32, 32))
    cfg = SmolVLAConfig(
        vlm_model_name=str(backbone),
        input_features={
            "observation.images.image": image,
            "observation.images.image2": image,
            "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(8,)),
        },
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(7,))},
        chunk_size=8,
        n_action_steps=8,
        resize_imgs_with_padding=(32, 32),
        num_vlm_layers=2,
        num_steps=2,
        tokenizer_max_length=24,
        device="cpu",
    )
    folder = tmp / "smolvla_libero"
    stats = {
        k: {s: torch.as_tensor(v, dtype=torch.float32) for s, v in d.items()}
        for k, d in tiny_stats(8, 7).items()
    }
    pre, post = make_smolvla_pre_post_processors(cfg, stats)
    SmolVLAPolicy(cfg).save_pretrained(folder)
    pre.save_pretrained(folder)
    post.save_pretrained(folder)
    return folder, backbone


def _train(args: list[str], cwd: Path) -> str:
    p = subprocess.run([str(BIN / "vla-train"), *args], capture_output=True, text=True, timeout=900, cwd=cwd)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout


def test_a_pretrained_smolvla_is_fine_tuned_then_post_trained_with_recap_in_libero(tmp_path):
    demos = _demos(tmp_path)
    folder, backbone = _lerobot_smolvla(tmp_path)
    sft = tmp_path / "sft"
    out = _train(
        [
            "experiment=libero_smolvla_sft",
            f"policy.pretrained_path={folder}",
            f"policy.vlm_model_name={backbone}",
            *TINY,
            f"data.roots=[{demos}]",
            *LIBERO_SMALL,
            f"out={sft}",
        ],
        tmp_path,
    )
    assert "env.task=libero_object (from the data)" in out and "eval: success_rate=" in out
    report = json.loads(next((sft / "eval").glob("step_*/eval.json")).read_text())
    assert report["summary"]["tasks"][0]["name"] == f"0: {SOUP}" and report["summary"]["image_size"] == [
        32,
        32,
    ]

    recap = tmp_path / "recap"
    _train(
        [
            "experiment=libero_smolvla_recap",
            f"init_from={sft / 'checkpoints/last'}",
            f"data.roots=[{demos}]",
            "loop.rounds=1",
            "loop.rollout_episodes=2",
            "algo.critic.steps=5",
            "algo.critic.batch_size=8",
            *LIBERO_SMALL,
            f"out={recap}",
        ],
        tmp_path,
    )
    rounds = json.loads((recap / "rounds.json").read_text())
    assert [r["round"] for r in rounds] == [0, 1] and "per_task_success" in rounds[1]
    rollouts = recap / "round_1" / "rollouts"
    from vla.data.reader import read_episode_info

    infos = read_episode_info(rollouts)
    assert len(infos) == 2 and all(i.extra["libero_suite"] == "libero_object" for i in infos)
    assert len({i.extra["libero_init"] for i in infos}) == 2  # two initial states of the rollouts' plan
    assert (recap / "round_1" / "train" / "critic" / "labels.safetensors").is_file()  # the critic's labels
