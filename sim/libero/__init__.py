"""LIBERO (Liu et al. 2023) under the shared runtime: suites with their fixed initial states, step limits and
success predicates (:mod:`sim.libero.suite`), a task as a :class:`~vla.robot.Robot` with observations in
the layout of LeRobot's LIBERO datasets (:mod:`sim.libero.robot`), and per-task evaluation
(:mod:`sim.libero.evaluation`, ``vla-eval env=libero``). Needs the ``libero`` extra."""
