"""``vla-rollout checkpoint=<dir> task=<name> episodes=<n> out=<dir>``: policy rollouts with a simulated
teleoperator taking over (HG-DAgger style), recorded as a LeRobotDataset v3."""

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from sim.rollout import RolloutConfig, rollout
from sim.scripts import CONFIG_DIR
from vla.errors import exit_on_refusal

ConfigStore.instance().store(name="rollout_schema", node=RolloutConfig)


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="rollout")
def _run(cfg: DictConfig) -> None:
    c: RolloutConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    with exit_on_refusal():  # rollout() checks its inputs before any worker starts or out= is written
        summary = rollout(c)
    print(summary.table())
    print(f"dataset: {summary.out}")
    print(f"success: {summary.successes}/{summary.episodes}")


def main() -> None:
    _run()


if __name__ == "__main__":
    main()
