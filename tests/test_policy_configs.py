"""configs/policy/*.yaml list every field of their policy's config class, so ``policy.<field>=v`` needs no
``+`` (docs/policies.md); null there is the class's own default."""

from dataclasses import fields
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import policies  # noqa: F401  (registers the policies)
from vla.hydra_utils import CONFIG_DIR
from vla.policy import POLICIES

PRESETS = sorted((Path(CONFIG_DIR) / "policy").glob("*.yaml"))


@pytest.mark.parametrize("path", PRESETS, ids=lambda p: p.stem)
def test_a_policy_preset_lists_every_field_of_its_config_class(path):
    preset = yaml.safe_load(path.read_text())
    cls = POLICIES.get(preset["type"]).config_class
    names = [f.name for f in fields(cls)]
    assert sorted(preset) == sorted(names), (
        f"{path.name}: missing {sorted(set(names) - set(preset))}, unknown {sorted(set(preset) - set(names))}"
    )


def test_any_policy_field_is_set_without_plus():
    import training.scripts.train  # noqa: F401  (registers train_schema)

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        own = compose("train", overrides=["policy.dropout=0.1", "policy.guidance_interval=[0.2,0.8]"])
        adapter = compose(
            "train", overrides=["policy=smolvla", "policy.vlm_model_name=/m", "policy.pretrained_path=/ckpt"]
        )
    fm = OmegaConf.to_object(own).policy
    assert fm["dropout"] == 0.1 and fm["guidance_interval"] == [0.2, 0.8]
    assert None not in fm.values() and "time_eps" not in fm  # null: left to the class's default
    smol = OmegaConf.to_object(adapter).policy
    assert smol["pretrained_path"] == "/ckpt" and smol["type"] == "smolvla"
