"""``vla-replay dataset=<dir>``: open-loop replay of every episode from its recorded initial state
(``env=libero``: a LIBERO dataset, :mod:`sim.libero.replay`).
``vla-replay dataset=<dir> critic=<critic folder>``: value and advantage along the episodes (PNG)."""

import importlib
import sys
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from hardware.profiles import PROFILES
from sim.replay import ReplayConfig, replay
from sim.scripts import simulator
from vla.checks import check_dataset
from vla.errors import InputError, exit_on_refusal
from vla.hydra_utils import CONFIG_DIR, typed_config

ConfigStore.instance().store(name="replay_schema", node=ReplayConfig)


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="replay")
def _run(cfg: DictConfig) -> None:
    with exit_on_refusal():  # a refused input: one line on stderr, status 2, nothing written
        c: ReplayConfig = typed_config(cfg)  # a missing mandatory value: one line
        # (with the robot profiles: state and action within the named robot's joint ranges)
        check_dataset(c.dataset, profiles=PROFILES)
        if c.critic and not Path(c.critic).is_dir():
            raise InputError(f"{c.critic}: critic folder not found; pass critic=<post-training out>/critic")
        if c.critic:  # offline, through the critic (the module is named in config, like env runners)
            module = importlib.import_module(c.critic_module)
            path = module.replay_through_critic(c.dataset, c.critic, c.plot, c.plot_episodes)
            print(f"credit plot: {path}")
            return
        k, n = replay(c)
    print(f"replay success: {k}/{n}")


def main() -> None:
    with exit_on_refusal():
        env, rest = simulator(sys.argv[1:])
    sys.argv = [sys.argv[0], *rest, f"simulator={env}"]
    _run()


if __name__ == "__main__":
    main()
