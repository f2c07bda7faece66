"""vla.kinematics on arms small enough to solve by hand, and its input checks."""

from __future__ import annotations

import numpy as np
import pytest

from vla.kinematics import DHChain, Pose, URDFChain, URDFJoint

Q = np.array(
    [0.3, 0.5]
)  # a planar two-link arm, unit links: tip at (cos q1 + cos(q1+q2), sin q1 + sin(q1+q2))
TIP = [np.cos(0.3) + np.cos(0.8), np.sin(0.3) + np.sin(0.8), 0.0]


def test_standard_modified_and_urdf_chains_agree_on_a_planar_arm():
    standard = DHChain(a=(1.0, 1.0), d=(0.0, 0.0), alpha=(0.0, 0.0), convention="standard")
    modified = DHChain(
        a=(0.0, 1.0), d=(0.0, 0.0), alpha=(0.0, 0.0), convention="modified", tool=Pose((1, 0, 0))
    )
    urdf = URDFChain(joints=(URDFJoint(Pose()), URDFJoint(Pose((1, 0, 0)))), tool=Pose((1, 0, 0)))
    for chain in (standard, modified, urdf):
        np.testing.assert_allclose(chain.tool_position(Q), TIP, atol=1e-12)
        np.testing.assert_allclose(
            chain.forward(Q)[:3, :3] @ [1, 0, 0], [np.cos(0.8), np.sin(0.8), 0], atol=1e-12
        )


def test_alpha_base_and_tool_rotation():
    # alpha = +90 deg turns the next joint's axis from z to -y (standard DH: Rx(alpha) after Tx(a))
    arm = DHChain(a=(0.0, 0.0), d=(0.0, 1.0), alpha=(np.pi / 2, 0.0))
    np.testing.assert_allclose(arm.tool_position(np.zeros(2)), [0, -1, 0], atol=1e-12)
    lifted = DHChain(a=(1.0,), d=(0.0,), alpha=(0.0,), base=Pose((0, 0, 0.5), (0, 0, np.pi / 2)))
    np.testing.assert_allclose(lifted.tool_position(np.zeros(1)), [0, 1, 0.5], atol=1e-12)
    # URDF rpy = fixed-axis roll, pitch, yaw: Rz(yaw) Ry(pitch) Rx(roll)
    r = Pose(rpy=(np.pi / 2, 0.0, np.pi / 2)).matrix()[:3, :3]
    np.testing.assert_allclose(r @ [0, 1, 0], [0, 0, 1], atol=1e-12)
    np.testing.assert_allclose(r @ [1, 0, 0], [0, 1, 0], atol=1e-12)


def test_urdf_joint_axis_is_respected():
    joint = URDFJoint(Pose(), axis=(0, 0, -2))  # normalised; a negative axis turns the other way
    chain = URDFChain(joints=(joint,), tool=Pose((1, 0, 0)))
    np.testing.assert_allclose(chain.tool_position(np.array([np.pi / 2])), [0, -1, 0], atol=1e-12)


def test_bad_chains_and_inputs_name_the_problem():
    with pytest.raises(ValueError, match=r"a, d, alpha, theta_offset need the same length"):
        DHChain(a=(0.0, 1.0), d=(0.0,), alpha=(0.0, 0.0))
    with pytest.raises(ValueError, match=r"convention='craig'; choose one of \['modified', 'standard'\]"):
        DHChain(a=(1.0,), d=(0.0,), alpha=(0.0,), convention="craig")
    with pytest.raises(ValueError, match="URDF joint axis must be non-zero"):
        URDFJoint(Pose(), axis=(0, 0, 0))
    with pytest.raises(ValueError, match="need >= 1 URDFJoint"):
        URDFChain(joints=())
    with pytest.raises(ValueError, match="pose xyz: need 3 finite values"):
        Pose(xyz=(0.0, 1.0))
    arm = DHChain(a=(1.0, 1.0), d=(0.0, 0.0), alpha=(0.0, 0.0))
    with pytest.raises(ValueError, match=r"q must be \[2\] or \[B, 2\] joint positions, got shape \(3,\)"):
        arm.tool_position(np.zeros(3))
