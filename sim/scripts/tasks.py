"""``vla-tasks``: list the task suite (name, episode limit, instructions)."""

import sys

from sim.tasks import TASKS

USAGE = (
    "usage: vla-tasks\n"
    "  lists the MuJoCo tasks: name, episode step limit, instructions (the first is canonical)"
)


def main() -> None:
    args = sys.argv[1:]
    if args:
        print(USAGE, file=sys.stdout if args in (["-h"], ["--help"]) else sys.stderr)
        raise SystemExit(0 if args in (["-h"], ["--help"]) else 2)
    print(f"{'task':<12} {'max steps':>9}  instructions")
    for name in TASKS:
        t = TASKS.get(name)
        print(f"{name:<12} {t.max_steps:>9}  " + " | ".join(t.instructions))


if __name__ == "__main__":
    main()
