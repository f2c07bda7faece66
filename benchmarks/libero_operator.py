"""What LIBERO's scripted operator (sim/libero/operator.py) completes: it drives every task of a suite from
the first period (``patience=0``, a policy that holds still) from the given initial states, through the one
control loop, and records per episode whether the object was placed, the steps, the grasp attempts and
where the object ended relative to the target.

    python benchmarks/libero_operator.py [--suite libero_object] [--inits 0 7 21]

Writes ``benchmarks/results/libero_operator.json`` and prints one line per episode and the total.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _provenance import write_record

import sim  # noqa: F401  (GL backend before MuJoCo)
from sim.libero.operator import OperatorConfig, ScriptedPlaceOperator
from sim.libero.robot import LIBERO_PANDA, LiberoRobot
from sim.libero.suite import NOOP, suite_tasks
from vla.runtime.config import DeployConfig
from vla.runtime.loop import run_episode
from vla.runtime.stack import build_stack


def drive(task, init: int) -> dict:
    """One episode of ``task`` from initial state ``init`` with the operator in control throughout."""
    robot = LiberoRobot([task], per_task=1, image_size=(32, 32), first_init=init)
    stack = build_stack(DeployConfig(), lambda obs: np.asarray([NOOP]), profile=LIBERO_PANDA, chunk_size=1)
    operator = ScriptedPlaceOperator(OperatorConfig(patience=0))
    t0 = time.time()
    try:
        r = run_episode(robot, stack, seed=0, teleop=operator)
        supported = operator.supported
        offset = (
            (operator._pos(operator.obj) - operator._pos(operator.target)).round(3).tolist()
            if supported
            else None
        )
    finally:
        robot.close()
    return {
        "task": task.index,
        "name": task.name,
        "init": init,
        "supported": supported,
        "placed": bool(r.success),
        "steps": r.steps,
        "grasp_attempts": operator.attempt + 1 if supported else 0,
        "object_minus_target": offset,
        "seconds": round(time.time() - t0, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", default="libero_object")
    p.add_argument("--inits", type=int, nargs="+", default=[0, 7, 21])
    args = p.parse_args()
    started = time.time()
    episodes = []
    for init in args.inits:
        for task in suite_tasks(args.suite):
            e = drive(task, init)
            episodes.append(e)
            print(
                f"init {init} task {task.index} ({task.name}): placed={e['placed']} steps={e['steps']} "
                f"grasps={e['grasp_attempts']} object-target={e['object_minus_target']}",
                flush=True,
            )
    placed = sum(e["placed"] for e in episodes)
    print(f"placed {placed} of {len(episodes)}")
    record = {"suite": args.suite, "inits": args.inits, "placed": placed, "episodes": episodes}
    print(f"record: {write_record('libero_operator', record, started)}")


if __name__ == "__main__":
    main()
