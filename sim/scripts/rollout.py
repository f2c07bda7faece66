"""``vla-rollout checkpoint=<dir> task=<name> episodes=<n> out=<dir>``: policy rollouts with a simulated
teleoperator taking over (HG-DAgger style), recorded as a LeRobotDataset v3."""

from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from sim.rollout import RolloutConfig, rollout
from sim.scripts import CONFIG_DIR
from vla.checks import check_checkpoint, check_dataset
from vla.errors import exit_on_refusal

ConfigStore.instance().store(name="rollout_schema", node=RolloutConfig)


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="rollout")
def _run(cfg: DictConfig) -> None:
    c: RolloutConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    with exit_on_refusal():  # before any worker starts or out= is written
        check_checkpoint(c.checkpoint, imports=c.imports)
        out = Path(c.out)  # type: ignore[arg-type]
        if c.resume and out.is_dir() and any(out.iterdir()):  # the episodes to append to
            check_dataset(out, resuming=True)
    summary = rollout(c)
    print(summary.table())
    print(f"dataset: {summary.out}")
    print(f"success: {summary.successes}/{summary.episodes}")


def main() -> None:
    _run()


if __name__ == "__main__":
    main()
