"""``vla-eval checkpoint=<dir> task=<name> episodes=<n>``: closed-loop success rate of a policy checkpoint.

``env=`` picks the simulator: ``mujoco`` (default; our tasks, ``configs/eval.yaml``) or ``libero``
(``vla-eval env=libero suite=<name> ...``: a LIBERO suite by its standard protocol, a per-task table;
``configs/eval_libero.yaml``). Each has its own schema, so ``env=`` is read before Hydra composes.
"""

import sys

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from sim.evaluation import EvalConfig, evaluate
from sim.libero.evaluation import LiberoEvalConfig, evaluate_libero
from sim.scripts import CONFIG_DIR, simulator
from vla.errors import exit_on_refusal
from vla.hydra_utils import refuse_renamed, typed_config

ConfigStore.instance().store(name="eval_schema", node=EvalConfig)
ConfigStore.instance().store(name="eval_libero_schema", node=LiberoEvalConfig)


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


@hydra.main(version_base=None, config_path=CONFIG_DIR, config_name="eval_libero")
def _run_libero(cfg: DictConfig) -> None:
    with exit_on_refusal():
        c: LiberoEvalConfig = typed_config(cfg)
        if c.holds_still:
            print("no checkpoint: the robot holds still (a check of the LIBERO set-up; every task fails)")
        result = evaluate_libero(c)
    print(result.table())
    print(f"report: {result.json_path}")
    s = result.summary()["all"]
    print(f"success: {s['successes']}/{s['episodes']}")


def main() -> None:
    with exit_on_refusal():
        env, rest = simulator(sys.argv[1:])
        refuse_renamed(rest)  # an old spelling of a renamed key: one line naming the new one
    sys.argv = [sys.argv[0], *rest]
    (_run_libero if env == "libero" else _run)()


if __name__ == "__main__":
    main()
