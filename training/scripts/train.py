"""``vla-train``: train a policy with an algorithm on LeRobotDataset folders (Hydra).

Each run trains in its own folder (``out=``, by default ``outputs/train/<date>/<time>_<experiment>``), which
holds Hydra's record of it (``.hydra/config.yaml``, ``overrides.yaml``, ``hydra.yaml``) and ``train.log``."""

import sys
from functools import partial
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from training.config import TrainConfig
from training.run import train
from vla.errors import exit_on_refusal
from vla.hydra_utils import CONFIG_DIR, refuse_renamed, schema_node, typed_config

# data.keys.image takes new cameras without "+" (data.keys.image.agentview=observation.images.top)
ConfigStore.instance().store(name="train_schema", node=schema_node(TrainConfig, ["data.keys.image"]))


def save_hydra_record(cfg: DictConfig, out: Path) -> None:
    """``<out>/.hydra/``: the composed config (with the run's folder), the overrides, Hydra's own config.
    Written by us, not Hydra: the folder is chosen after the config is composed and checked."""
    hc = HydraConfig.get()
    folder = out / ".hydra"
    folder.mkdir(parents=True, exist_ok=True)
    composed = cfg.copy()
    with open_dict(composed):
        composed.out = str(out)
    OmegaConf.save(composed, folder / "config.yaml")
    OmegaConf.save(hc.overrides.task, folder / "overrides.yaml")
    OmegaConf.save(OmegaConf.create({"hydra": hc}), folder / "hydra.yaml")


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="train")
def _run(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    with exit_on_refusal():  # a refused input (2) or a non-finite loss (1): one line on stderr
        c: TrainConfig = typed_config(cfg)  # a missing mandatory value: one line
        train(  # checks data.roots, init_from and out='s earlier run before any work or output folder
            c,
            experiment=hc.runtime.choices.get("experiment"),
            job=hc.job.num if hc.mode == RunMode.MULTIRUN else None,
            record=partial(save_hydra_record, cfg),
        )  # prints `checkpoint: <folder>` as its last line


def main() -> None:
    with exit_on_refusal():
        refuse_renamed(sys.argv[1:])  # an old spelling of a renamed key: one line naming the new one
    _run()


if __name__ == "__main__":
    main()
