"""``vla-collect task=<name> episodes=<n> out=<dir> seed=<s>``: scripted-expert episodes -> LeRobotDataset."""

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from sim.collect import CollectConfig, collect
from vla.hydra_utils import CONFIG_DIR

ConfigStore.instance().store(name="collect_schema", node=CollectConfig)


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="collect")
def _run(cfg: DictConfig) -> None:
    c: CollectConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    k, n, root = collect(c)
    print(f"dataset: {root}")
    print(f"expert success: {k}/{n}")


def main() -> None:
    _run()


if __name__ == "__main__":
    main()
