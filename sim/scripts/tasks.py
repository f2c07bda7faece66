"""``vla-tasks``: list the task suite (name, episode limit, instructions)."""

from sim.tasks import TASKS


def main() -> None:
    print(f"{'task':<12} {'max steps':>9}  instructions")
    for name in TASKS:
        t = TASKS.get(name)
        print(f"{name:<12} {t.max_steps:>9}  " + " | ".join(t.instructions))


if __name__ == "__main__":
    main()
