"""The arm profiles: consistent, their kinematics checked (against MuJoCo for the Panda, against the makers'
tables for the UR5e and SO-101), the Panda workspace box holding everything the scripted experts do."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from expert_reach import TASKS, tool_points

from hardware.profiles import PROFILES, get_profile
from sim.env import EnvConfig, TabletopEnv
from sim.robots.panda import PANDA as SIM_PANDA
from sim.robots.panda import arm_qpos_adr, grip_site_name
from sim.scene import base_scene
from vla.kinematics import Pose

NAMES = ("fr3", "panda", "so101", "ur5e")


def test_the_four_arms_are_registered():
    assert set(NAMES) <= set(PROFILES.names())
    for name in PROFILES.names():
        assert get_profile(name) is PROFILES.get(name)
        assert get_profile(name).name == name


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(KeyError, match="unknown robot profile 'nope'; registered: ") as err:
        PROFILES.get("nope")
    assert all(name in str(err.value) for name in NAMES)


@pytest.mark.parametrize("name", PROFILES.names())
def test_profile_is_consistent(name):
    p = get_profile(name)
    n = p.arm_dim
    assert len(p.joints) == len(set(p.joints)) == len(p.limits) == len(p.home) == n
    assert p.limits.contains(np.asarray(p.home)).all(), "home outside the joint limits"
    assert all(lo < hi for lo, hi in zip(p.limits.lower, p.limits.upper, strict=True))
    assert p.gripper is not None and p.action_dim == n + 1
    assert p.cameras and len(set(p.camera_names)) == len(p.cameras)
    assert p.kinematics is not None and p.workspace is not None
    assert p.kinematics.n_joints == n  # type: ignore[attr-defined]
    tool = p.kinematics.tool_position(np.asarray(p.home))
    assert tool.shape == (3,)
    assert p.workspace.violation(tool) is None, f"FK(home) = {tool} outside the workspace"


@pytest.mark.parametrize("name", PROFILES.names())
def test_kinematics_is_vectorised(name):
    p = get_profile(name)
    lo, hi = np.asarray(p.limits.lower), np.asarray(p.limits.upper)
    q = np.random.default_rng(0).uniform(lo, hi, size=(8, p.arm_dim))
    batch = p.kinematics.tool_position(q)  # type: ignore[union-attr]
    single = np.stack([p.kinematics.tool_position(x) for x in q])  # type: ignore[union-attr]
    np.testing.assert_allclose(batch, single, atol=1e-12)


def test_panda_kinematics_matches_the_mujoco_grip_site():
    import mujoco  # here, not at the top: ``import sim`` must pick the GL backend before mujoco is imported

    kin = get_profile("panda").kinematics
    model = base_scene().compile()  # the robot base at the world origin, the table top at z = 0
    data = mujoco.MjData(model)
    adr, site = arm_qpos_adr(model), model.site(grip_site_name()).id
    lo, hi = SIM_PANDA.joint_range.T
    for q in np.random.default_rng(1).uniform(lo, hi, size=(50, 7)):
        data.qpos[adr] = q
        mujoco.mj_kinematics(model, data)
        pose = kin.forward(q)  # type: ignore[union-attr]
        err = np.linalg.norm(pose[:3, 3] - data.site_xpos[site])
        assert err < 1e-3, f"q={q}: FK is {err * 1000:.2f} mm from the MuJoCo grip site"
        # the orientation too (robosuite writes its quaternions to 3 decimals)
        np.testing.assert_allclose(pose[:3, :3], data.site_xmat[site].reshape(3, 3), atol=2e-3)


def test_sim_panda_reads_the_profile():
    profile = get_profile("panda")
    env = TabletopEnv(EnvConfig(task="reach", render=False))
    model = env.model
    ids = [model.joint(SIM_PANDA.prefix + j).id for j in profile.joints]
    limits = np.stack([profile.limits.lower, profile.limits.upper], axis=1)
    np.testing.assert_array_equal(model.jnt_range[ids], limits)
    np.testing.assert_array_equal(model.actuator_ctrlrange[:7], limits)
    np.testing.assert_array_equal(model.actuator_ctrlrange[7], profile.gripper.range)  # type: ignore[union-attr]
    np.testing.assert_allclose(
        env.action_space.low, [*profile.limits.lower, profile.gripper.closed], rtol=1e-6
    )  # type: ignore[union-attr]
    np.testing.assert_allclose(
        env.action_space.high, [*profile.limits.upper, profile.gripper.open], rtol=1e-6
    )  # type: ignore[union-attr]
    env.reset(seed=0)
    np.testing.assert_allclose(env.joint_state()[:7], profile.home, atol=1e-2)  # after 10 settling steps
    env.close()


def _check_inside_the_panda_box(seeds: range, margin: float) -> None:
    box = get_profile("panda").workspace
    kin = get_profile("panda").kinematics
    assert box is not None and kin is not None
    lo, hi = np.asarray(box.lower), np.asarray(box.upper)
    for task in TASKS:
        p = tool_points(task, seeds, kin)
        bad = [box.violation(x) for x in p if box.violation(x)]
        assert not bad, f"{task}: expert tool points leave the Panda box: {bad[:3]}"
        # a margin on x, y and the top; the floor sits just below the lowest point and above the table
        assert (p[:, :2].min(0) - lo[:2] >= margin).all() and (hi - p.max(0) >= margin).all(), task
        assert 0.0 <= lo[2] <= p[:, 2].min(), task


def test_expert_tool_points_stay_inside_the_panda_box():
    _check_inside_the_panda_box(range(3), margin=0.03)


@pytest.mark.slow
def test_expert_tool_points_stay_inside_the_panda_box_over_20_seeds():
    """The measurement the box is sized from (see PANDA_WORKSPACE in hardware/profiles/panda.py)."""
    _check_inside_the_panda_box(range(20), margin=0.04)


def test_ur5e_kinematics_at_the_published_zero_pose():
    """UR's DH table (standard DH): at q = 0 the arm lies stretched along -x. By hand: x = a2 + a3, the wrist
    offsets d4 then d6 along -y, and d5 down from the shoulder height d1."""
    a2, a3, d1, d4, d5, d6 = -0.425, -0.3922, 0.1625, 0.1333, 0.0997, 0.0996
    kin = get_profile("ur5e").kinematics
    np.testing.assert_allclose(kin.tool_position(np.zeros(6)), [a2 + a3, -(d4 + d6), d1 - d5], atol=1e-9)  # type: ignore[union-attr]
    # shoulder lift -90 deg, wrist 1 -90 deg: upper arm, forearm and wrist 2 stacked straight up
    q = np.array([0.0, -np.pi / 2, 0.0, -np.pi / 2, 0.0, 0.0])
    np.testing.assert_allclose(kin.tool_position(q), [0.0, -(d4 + d6), d1 - a2 - a3 + d5], atol=1e-9)  # type: ignore[union-attr]


def test_so101_kinematics_at_zero_adds_up_the_urdf_offsets():
    """At q = 0 (the URDF's frames composed with quarter turns) the links stack as: base to shoulder pan
    (0.0388, 0, 0.0624); down the pan axis to the lift axis (0.0304, -0.0183, 0.0542); upper arm up 0.1126 and
    forward 0.028; forearm forward 0.1349 and up 0.0052; wrist forward 0.0611 and sideways 0.0181. The tool
    point is 0.0985 m (the gripper_frame offset's length) further on, pointing forward."""
    kin = get_profile("so101").kinematics
    wrist = dataclasses.replace(kin, tool=Pose()).tool_position(np.zeros(5))  # type: ignore[type-var]
    expected = [
        0.0388353 + 0.0303992 + 0.028 + 0.1349 + 0.0611,
        -8.97657e-09 - 0.0182778 + 0.0181,
        0.0624 + 0.0542 + 0.11257 + 0.0052,
    ]
    np.testing.assert_allclose(wrist, expected, atol=2e-5)  # the URDF writes pi/2 as 1.5708
    tool = kin.tool_position(np.zeros(5))  # type: ignore[union-attr]
    assert np.linalg.norm(tool - wrist) == pytest.approx(np.linalg.norm([0.0079, 0.000218121, 0.0981274]))
    assert tool[0] - wrist[0] > 0.09  # the gripper points forward at zero
