"""The LIBERO presets for pretrained VLAs: every one composes, and the SmolVLA and pi0.5 pairs run end to end
at tiny size on the CPU through the documented ``python scripts/libero_tiny.py --model <model>`` (a tiny
LeRobot checkpoint, fine-tuned on the scripted operator's demos and evaluated per task in LIBERO, then one
RECAP round whose rollouts run in LIBERO)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from vla.hydra_utils import CONFIG_DIR

pytest.importorskip("libero.libero", reason="the libero extra is not installed (make setup installs it)")

ROOT = Path(__file__).resolve().parents[2]
SOUP = "pick_up_the_alphabet_soup_and_place_it_in_the_basket"


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
        assert typed.post_training and typed.loop.teleop["enabled"] == (stage in ("apo", "recap"))


@pytest.fixture(scope="module")
def tiny_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One output folder for both models: the operator's demos are made once, by the first run."""
    return tmp_path_factory.mktemp("libero_tiny")


@pytest.mark.parametrize("model", ["smolvla", "pi05"])
def test_the_tiny_recipe_runs_end_to_end(model, tiny_out):
    """``python scripts/libero_tiny.py --model <model>`` (docs/libero.md): operator demos, a tiny LeRobot
    checkpoint, stage 1 (fine-tune, per-task evaluation in LIBERO) and one RECAP round of stage 2 (rollouts
    in LIBERO)."""
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts/libero_tiny.py"), "--model", model, "--out", str(tiny_out)],
        capture_output=True,
        text=True,
        timeout=1500,
        cwd=tiny_out,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    from vla.checkpoint import read_config
    from vla.data.reader import read_episode_info

    demos = read_episode_info(tiny_out / "demos")
    assert len(demos) == 2 and all(
        d.extra["takeovers"] == 1 for d in demos
    )  # the operator drove from the start
    sft = tiny_out / model / "sft"
    assert read_config(sft / "checkpoints" / "last")["type"] == model  # the adapter the preset names
    report = json.loads(next((sft / "eval").glob("step_*/eval.json")).read_text())
    assert report["summary"]["tasks"][0]["name"] == f"0: {SOUP}" and report["summary"]["image_size"] == [
        32,
        32,
    ]
    assert "env.task=libero_object (from the data)" in p.stdout
    recap = tiny_out / model / "recap"
    rounds = json.loads((recap / "rounds.json").read_text())
    assert [r["round"] for r in rounds] == [0, 1] and "per_task_success" in rounds[1]
    rollouts = read_episode_info(recap / "round_1" / "rollouts")
    assert len(rollouts) == 2 and all(i.extra["libero_suite"] == "libero_object" for i in rollouts)
    assert len({i.extra["libero_init"] for i in rollouts}) == 2  # two initial states of the rollouts' plan
    assert (recap / "round_1" / "train" / "critic" / "labels.safetensors").is_file()
