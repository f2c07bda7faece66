"""``vla-bag2dataset bag=<rosbag2 folder> profile=<arm> out=<dataset>``: a recorded ROS 2 episode (MCAP or
sqlite3) as a validated LeRobotDataset episode (schema: hardware.rosbag.Bag2DatasetConfig)."""

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from hardware.rosbag import Bag2DatasetConfig, bag_to_dataset
from vla.errors import InputError, exit_on_refusal
from vla.hydra_utils import CONFIG_DIR, typed_config

ConfigStore.instance().store(name="bag2dataset_schema", node=Bag2DatasetConfig)


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="bag2dataset")
def _run(cfg: DictConfig) -> None:
    with exit_on_refusal():  # a refused input: one line on stderr, status 2
        try:
            c: Bag2DatasetConfig = typed_config(cfg)
            out, frames = bag_to_dataset(c)
        except (FileNotFoundError, ValueError, KeyError) as exc:
            raise InputError(str(exc).splitlines()[0]) from exc
    print(f"dataset: {out} (+1 episode, {frames} frames, validated)")


def main() -> None:
    _run()


if __name__ == "__main__":
    main()
