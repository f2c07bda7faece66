"""``vla-rollout checkpoint=<dir> task=<name> episodes=<n> out=<dir>``: policy rollouts with a simulated
teleoperator taking over (HG-DAgger style), recorded as a LeRobotDataset v3."""

import sys

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from sim.rollout import RolloutConfig, rollout
from sim.scripts import CONFIG_DIR
from vla.errors import exit_on_refusal
from vla.hydra_utils import refuse_renamed, typed_config

ConfigStore.instance().store(name="rollout_schema", node=RolloutConfig)


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="rollout")
def _run(cfg: DictConfig) -> None:
    with exit_on_refusal():  # rollout() checks its inputs before any worker starts or out= is written
        c: RolloutConfig = typed_config(cfg)  # a missing mandatory value: one line
        summary = rollout(c)
    print(summary.table())
    print(f"dataset: {summary.out}")
    print(f"success: {summary.successes}/{summary.episodes}")


def main() -> None:
    with exit_on_refusal():
        refuse_renamed(sys.argv[1:])  # an old spelling of a renamed key: one line naming the new one
    _run()


if __name__ == "__main__":
    main()
