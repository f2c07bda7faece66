"""``vla-collect task=<name> episodes=<n> out=<dir> seed=<s>``: scripted-expert episodes -> LeRobotDataset."""

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from sim.collect import CollectConfig, collect
from vla.errors import exit_on_refusal
from vla.hydra_utils import CONFIG_DIR, typed_config

ConfigStore.instance().store(name="collect_schema", node=CollectConfig)


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="collect")
def _run(cfg: DictConfig) -> None:
    with exit_on_refusal():
        c: CollectConfig = typed_config(cfg)  # a missing mandatory value: one line
    k, n, root = collect(c)
    print(f"dataset: {root}")
    print(f"expert success: {k}/{n}")


def main() -> None:
    _run()


if __name__ == "__main__":
    main()
