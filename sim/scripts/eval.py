"""``vla-eval checkpoint=<dir> task=<name> episodes=<n>``: closed-loop success rate of a policy checkpoint."""

import sys

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from sim.evaluation import EvalConfig, evaluate
from sim.scripts import CONFIG_DIR
from vla.errors import exit_on_refusal
from vla.hydra_utils import refuse_renamed, typed_config

ConfigStore.instance().store(name="eval_schema", node=EvalConfig)


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="eval")
def _run(cfg: DictConfig) -> None:
    with exit_on_refusal():  # evaluate() checks the checkpoint before any worker starts or out= is created
        c: EvalConfig = typed_config(cfg)  # a missing mandatory value: one line
        result = evaluate(c)
    print(result.table())
    print(f"report: {result.json_path}")
    for video in result.videos:
        print(f"video: {video}")
    if c.deploy.safety.enabled:
        for fault in result.summary()["faults"]:
            print(f"safety fault: {fault}")
        print(f"safety holds: {result.holds}/{result.n}")
    print(f"success: {result.successes}/{result.n}")


def main() -> None:
    with exit_on_refusal():
        refuse_renamed(sys.argv[1:])  # an old spelling of a renamed key: one line naming the new one
    _run()


if __name__ == "__main__":
    main()
