"""``vla-replay dataset=<dir>``: open-loop replay of every episode from its recorded initial state."""

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from sim.replay import ReplayConfig, replay
from vla.hydra_utils import CONFIG_DIR

ConfigStore.instance().store(name="replay_schema", node=ReplayConfig)


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="replay")
def _run(cfg: DictConfig) -> None:
    c: ReplayConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    k, n = replay(c)
    print(f"replay success: {k}/{n}")


def main() -> None:
    _run()


if __name__ == "__main__":
    main()
