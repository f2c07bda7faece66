"""``vla-train``: train a policy with an algorithm on LeRobotDataset folders (Hydra)."""

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from training.config import TrainConfig
from training.loop import train
from vla.errors import exit_on_refusal
from vla.hydra_utils import CONFIG_DIR, typed_config

ConfigStore.instance().store(name="train_schema", node=TrainConfig)


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="train")
def _run(cfg: DictConfig) -> None:
    with exit_on_refusal():  # a refused input (2) or a non-finite loss (1): one line on stderr
        c: TrainConfig = typed_config(cfg)  # a missing mandatory value: one line
        last = train(c)  # checks data.roots and init_from before any work or output folder
    print(f"checkpoint: {last}")


def main() -> None:
    _run()


if __name__ == "__main__":
    main()
