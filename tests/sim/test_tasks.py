"""Contract tests over every registered task, and each task's expert on a few seeds."""

import numpy as np
import pytest

import sim  # noqa: F401
from sim.env import EnvConfig, TabletopEnv
from sim.experts import ExpertNoise, ScriptedExpert, run_expert_episode
from sim.tasks import TASKS

ALL = TASKS.names()


def test_suite_has_the_five_tasks():
    assert {"reach", "pick_place", "push", "stack", "drawer"} <= set(ALL)


@pytest.mark.parametrize("task", ALL)
def test_task_contract(task):
    cls = TASKS.get(task)
    assert len(cls.instructions) >= 3 and len(set(cls.instructions)) == len(cls.instructions)
    env = TabletopEnv(EnvConfig(task=task, image_size=(32, 40)))
    obs, info = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    assert obs["agentview"].shape == (32, 40, 3) and obs["wrist"].shape == (32, 40, 3)
    assert obs["agentview"].std() > 5 and obs["wrist"].std() > 1  # real pictures, not a blank frame
    assert obs["instruction"] in cls.instructions
    assert not info["success"] and not env.task.success(env.model, env.data)  # not solved at reset
    obs, _r, _term, _trunc, info = env.step(env.action_space.sample())
    assert env.observation_space.contains(obs)
    env.close()


@pytest.mark.parametrize("task", ALL)
def test_expert_succeeds_on_a_few_seeds(task):
    env = TabletopEnv(EnvConfig(task=task, render=False))
    expert = ScriptedExpert(env)
    results = [run_expert_episode(env, expert, seed)[0] for seed in (11, 12, 13)]
    assert all(results), (
        f"{task} expert failed on seeds {[s for s, ok in zip((11, 12, 13), results, strict=False) if not ok]}"
    )


def test_noisy_expert_is_different_and_still_mostly_works():
    env = TabletopEnv(EnvConfig(task="pick_place", render=False))
    clean, noisy = [], []
    e0 = ScriptedExpert(env)
    e1 = ScriptedExpert(env, ExpertNoise(action_std=0.02, detour_prob=1.0), seed=0)
    for expert, out in ((e0, clean), (e1, noisy)):
        env.reset(seed=5)
        expert.reset()
        out.extend(expert.act() for _ in range(15))
    assert np.abs(np.array(clean) - np.array(noisy)).max() > 0.01
    ok = [run_expert_episode(env, e1, s)[0] for s in range(3)]
    assert sum(ok) >= 2


def test_slow_operator_succeeds_later_on_the_same_path():
    """speed_scale < 1: the free-space moves at a lower reference speed, the contact phases at the task's --
    the demo still succeeds, later, and its gripper passes through the same points (slow but clean)."""
    env = TabletopEnv(EnvConfig(task="pick_place", render=False))
    runs = []
    for scale in (1.0, 0.5):
        grips: list[np.ndarray] = []
        phases: list[str] = []
        expert = ScriptedExpert(env, ExpertNoise(speed_scale=scale), seed=0)

        def log(*_, grips=grips, phases=phases, expert=expert):
            grips.append(env.grip_pos().copy())
            phases.append(expert.phases[expert.k].name)

        ok, steps = run_expert_episode(env, expert, seed=4, on_step=log)
        contact = sum(name in ("descend", "close", "lift", "lower", "release") for name in phases)
        runs.append((ok, steps, contact, np.array(grips)))
    (ok_fast, n_fast, c_fast, g_fast), (ok_slow, n_slow, c_slow, g_slow) = runs
    assert ok_fast and ok_slow
    assert n_slow > 1.3 * n_fast
    assert abs(c_slow - c_fast) <= 2, (c_fast, c_slow)  # the contact phases keep their timing
    # every point of the fast path lies near the slow path
    gap = np.linalg.norm(g_fast[:, None] - g_slow[None], axis=-1).min(axis=1)
    assert gap.max() < 0.02, gap.max()


def test_hesitating_operator_holds_still_then_follows_the_same_path():
    """pause_prob=1: before each free-space move the arm holds still for pause_steps steps; the demo
    succeeds later by about those steps, on the plain expert's path."""
    env = TabletopEnv(EnvConfig(task="pick_place", render=False))
    runs = []
    for noise in (ExpertNoise(), ExpertNoise(pause_prob=1.0, pause_steps=15)):
        actions: list[np.ndarray] = []
        grips: list[np.ndarray] = []
        phases: list[str] = []
        expert = ScriptedExpert(env, noise, seed=0)

        def log(_obs, action, *_, actions=actions, grips=grips, phases=phases, expert=expert):
            actions.append(action.copy())
            grips.append(env.grip_pos().copy())
            phases.append(expert.phases[expert.k].name)

        ok, steps = run_expert_episode(env, expert, seed=4, on_step=log)
        runs.append((ok, steps, np.array(actions), np.array(grips), np.array(phases)))
    (ok_plain, n_plain, _, g_plain, _), (ok_pause, n_pause, a_pause, g_pause, ph_pause) = runs
    assert ok_plain and ok_pause
    paused = ph_pause == "pause"
    assert 2 * 15 <= paused.sum() <= 2 * 15 + 2  # two free-space moves (above, carry); + IK settling
    assert abs(n_pause - n_plain - paused.sum()) <= 2
    # while paused the grip stays put (the IK settles by millimetres) and the gripper keeps its state
    for part in np.split(np.flatnonzero(paused), np.flatnonzero(np.diff(np.flatnonzero(paused)) > 1) + 1):
        assert np.linalg.norm(g_pause[part[1:]] - g_pause[part[0]], axis=1).max() < 0.01
        assert np.ptp(a_pause[part, 7]) == 0
    gap = np.linalg.norm(g_plain[:, None] - g_pause[None], axis=-1).min(axis=1)
    assert gap.max() < 0.02, gap.max()  # the plain path lies on the hesitating one


def test_dart_noise_perturbs_the_states_but_records_the_clean_labels():
    """DART: the executed action is perturbed, the recorded one is the expert's clean command."""
    env = TabletopEnv(EnvConfig(task="reach", render=False))
    runs = []
    for noise in (ExpertNoise(), ExpertNoise(execute_std=0.05)):
        actions: list[np.ndarray] = []
        states: list[np.ndarray] = []

        def log(obs, a, *_, actions=actions, states=states):
            actions.append(a)
            states.append(obs["state"][:7])

        ok, _ = run_expert_episode(env, ScriptedExpert(env, noise, seed=0), seed=3, on_step=log)
        runs.append((ok, np.array(actions), np.array(states)))
    (ok0, a0, s0), (ok1, a1, s1) = runs
    assert ok0 and ok1
    n = min(len(a0), len(a1))
    # reach's expert plans in Cartesian space from its own commands, so the labels are unchanged ...
    np.testing.assert_allclose(a0[:n], a1[:n], atol=1e-6)
    # ... while the arm visits states off the clean path
    assert np.abs(s0[1:n] - s1[1:n]).max() > 0.02
    # contact_scale=0: no noise while grasping (only in free-space moves)
    env = TabletopEnv(EnvConfig(task="pick_place", render=False))
    expert = ScriptedExpert(env, ExpertNoise(execute_std=0.05, contact_scale=0.0), seed=0)
    env.reset(seed=3)
    expert.reset()
    for _ in range(40):
        a = expert.act()
        free = expert.phases[expert.k].detour_ok
        assert (np.abs(expert.executed(a) - a).max() > 0) == free
        env.step(expert.executed(a))


@pytest.mark.slow
@pytest.mark.parametrize("task", ALL)
def test_expert_success_rate_over_100_seeds(task):
    env = TabletopEnv(EnvConfig(task=task, render=False))
    expert = ScriptedExpert(env)
    ok = sum(run_expert_episode(env, expert, seed)[0] for seed in range(100))
    assert ok >= 95, f"{task}: expert success {ok}/100"


def test_biased_demonstrator_misses_on_the_side_of_its_bias():
    """aim_bias: every reach ends offset by the bias (a miscalibrated operator), so nearly all fail
    (a path may still graze the target zone on its way)."""
    env = TabletopEnv(EnvConfig(task="reach", render=False))
    expert = ScriptedExpert(env, ExpertNoise(aim_bias=(0.05, 0.0, 0.0)), seed=0)
    ok = []
    for seed in range(5):
        ok.append(run_expert_episode(env, expert, seed)[0])
        if not ok[-1]:  # (a success terminates the episode where it happens)
            miss = env.grip_pos() - env.task._target(env.model, env.data)
            np.testing.assert_allclose(miss, [0.05, 0.0, 0.0], atol=0.01)
    assert sum(ok) <= 1, ok


def test_vla_tasks_lists_every_task_and_answers_help():
    import subprocess
    import sys
    from pathlib import Path

    exe = str(Path(sys.executable).parent / "vla-tasks")
    listed = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    assert all(name in listed for name in TASKS)
    helped = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: vla-tasks")
    wrong = subprocess.run([exe, "task=reach"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "usage: vla-tasks" in wrong.stderr
