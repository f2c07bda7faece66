"""Arm model sources: vendored (default), an installed robosuite, and MuJoCo Menagerie via MENAGERIE_ROOT."""

import numpy as np
import pytest

import sim  # noqa: F401
from sim.env import EnvConfig, TabletopEnv
from sim.experts import ScriptedExpert, run_expert_episode

# Menagerie's franka_emika_panda/panda_nohand.xml, kinematics and names as published, with capsules instead
# of its meshes (which are not on this machine): what our loader reads from a real checkout.
_LINKS = [
    ("link1", 'pos="0 0 0.333"', "joint1", ""),
    ("link2", 'quat="1 -1 0 0"', "joint2", 'range="-1.7628 1.7628"'),
    ("link3", 'pos="0 -0.316 0" quat="1 1 0 0"', "joint3", ""),
    ("link4", 'pos="0.0825 0 0" quat="1 1 0 0"', "joint4", 'range="-3.0718 -0.0698"'),
    ("link5", 'pos="-0.0825 0.384 0" quat="1 -1 0 0"', "joint5", ""),
    ("link6", 'quat="1 1 0 0"', "joint6", 'range="-0.0175 3.7525"'),
    ("link7", 'pos="0.088 0 0" quat="1 1 0 0"', "joint7", ""),
]


def _fake_menagerie(root):
    body = '<geom class="panda/visual" type="capsule" size="0.05 0.02"/>'
    xml = ""
    for name, frame, joint, rng in reversed(_LINKS):
        inner = xml
        xml = (
            f'<body name="{name}" {frame}><inertial mass="1" pos="0 0 0" diaginertia="0.01 0.01 0.01"/>'
            f'<joint name="{joint}" {rng}/>{body}{inner}</body>'
        )
    doc = f"""<mujoco model="panda nohand">
  <compiler angle="radian" autolimits="true"/>
  <default><default class="panda">
    <joint armature="0.1" damping="1" axis="0 0 1" range="-2.8973 2.8973"/>
    <general dyntype="none" biastype="affine" ctrlrange="-2.8973 2.8973" forcerange="-87 87"/>
    <default class="panda/visual"><geom type="mesh" contype="0" conaffinity="0" group="2"/></default>
  </default></default>
  <worldbody><light name="top" pos="0 0 2"/>
    <body name="link0" childclass="panda"><inertial mass="0.6" pos="0 0 0" diaginertia="0.01 0.01 0.01"/>
      {body}{xml}</body>
  </worldbody>
  <actuator>
    <general class="panda" name="actuator1" joint="joint1" gainprm="4500" biasprm="0 -4500 -450"/>
  </actuator>
  <keyframe><key name="home" qpos="0 0 0 -1.57079 0 1.57079 -0.7853"/></keyframe>
</mujoco>"""
    folder = root / "franka_emika_panda"
    folder.mkdir(parents=True)
    (folder / "panda_nohand.xml").write_text(doc)


def test_menagerie_arm_has_the_same_kinematics_and_the_expert_works(tmp_path, monkeypatch):
    ref = TabletopEnv(EnvConfig(task="pick_place", render=False))
    ref.reset(seed=0)
    _fake_menagerie(tmp_path)
    monkeypatch.setenv("MENAGERIE_ROOT", str(tmp_path))
    monkeypatch.setenv("VLA_PANDA_MODEL", "menagerie")
    env = TabletopEnv(EnvConfig(task="pick_place", image_size=(16, 16)))
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(env.grip_pos(), ref.grip_pos(), atol=1e-3)
    assert obs["wrist"].std() > 1  # the wrist camera exists and sees something
    expert = ScriptedExpert(env)
    assert all(run_expert_episode(env, expert, s)[0] for s in (0, 1))


def test_model_choice_errors_say_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("VLA_PANDA_MODEL", "menagerie")
    monkeypatch.delenv("MENAGERIE_ROOT", raising=False)
    with pytest.raises(FileNotFoundError, match="MENAGERIE_ROOT"):
        TabletopEnv(EnvConfig(task="reach", render=False))
    monkeypatch.setenv("MENAGERIE_ROOT", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"panda_nohand\.xml not found"):
        TabletopEnv(EnvConfig(task="reach", render=False))
    monkeypatch.setenv("VLA_PANDA_MODEL", "robosuite")
    monkeypatch.setenv("VLA_ROBOSUITE_ASSETS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"robot\.xml not found"):
        TabletopEnv(EnvConfig(task="reach", render=False))
    monkeypatch.setenv("VLA_PANDA_MODEL", "ur5")
    with pytest.raises(ValueError, match="VLA_PANDA_MODEL='ur5'"):
        TabletopEnv(EnvConfig(task="reach", render=False))
