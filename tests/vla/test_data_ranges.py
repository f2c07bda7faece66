"""State and action values: the robot profile's joint ranges when the dataset names its robot, else the
outlier rule; neither trips on what the sim experts, policy rollouts and takeovers record."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from data_helpers import SPEC_KW, make_frame, set_value

from hardware.profiles import PROFILES, get_profile
from vla.checks import check_dataset
from vla.data import DatasetError, EpisodeSpec, EpisodeWriter, validate_dataset
from vla.data.layout import data_files, fixed_list_to_numpy
from vla.data.ranges import GRIPPER_MARGIN, JOINT_MARGIN, outlier_bounds
from vla.data.schema import ACTION, IS_INTERVENTION, STATE

PANDA = get_profile("panda")
RUNTIME_TESTS = Path(__file__).resolve().parents[1] / "runtime"


def _panda_frame(rng: np.random.Generator, i: int, length: int) -> dict:
    """A frame of an 8-d Panda dataset: joints near home, the gripper open."""
    q = np.r_[PANDA.home, 0.04] + np.r_[rng.normal(0, 0.05, 7), 0.0]
    return {
        **make_frame(0, i, length),
        STATE: q.astype(np.float32),
        ACTION: q.astype(np.float32),
        "complementary_info.policy_action": q.astype(np.float32),
    }


@pytest.fixture(scope="module")
def panda_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("panda") / "ds"
    spec = EpisodeSpec(**{**SPEC_KW, "state_dim": 8, "action_dim": 8}, robot_type="panda")
    rng = np.random.default_rng(0)
    with EpisodeWriter(root, spec) as w:
        for _ in range(2):
            for i in range(6):
                w.add_frame(_panda_frame(rng, i, 6))
            w.end_episode(success=True, source="scripted")
    return root


@pytest.fixture
def pds(panda_dataset: Path, tmp_path: Path) -> Path:
    shutil.copytree(panda_dataset, tmp_path / "pds")
    return tmp_path / "pds"


EP1 = "data/chunk-000/file-001.parquet"


def test_the_profile_rule_holds_joints_to_their_range_plus_the_margin(pds: Path) -> None:
    assert check_dataset(pds, profiles=PROFILES).warnings == []
    upper = PANDA.limits.upper[3]  # joint4: -0.0698
    set_value(pds / EP1, STATE, 2, 3, upper + 0.9 * JOINT_MARGIN)  # within the margin: accepted
    validate_dataset(pds, profiles=PROFILES)
    set_value(pds / EP1, STATE, 2, 3, upper + 1.1 * JOINT_MARGIN)
    match = (
        rf"file-001\.parquet: episode 1: field 'observation\.state'\[3\] \(joint4\) = 0\.15\d* at frame 2 is "
        rf"outside the 'panda' profile's range \[-3\.072, -0\.0698\] rad \+- {JOINT_MARGIN}"
    )
    with pytest.raises(DatasetError, match=match):
        validate_dataset(pds, profiles="hardware.profiles")  # by module name, as the validator's CLI does
    with pytest.raises(DatasetError, match=match):
        check_dataset(pds, profiles=PROFILES)  # as vla-train, vla-rollout and vla-replay do
    res = subprocess.run(
        [sys.executable, "-m", "vla.data.validate", str(pds)], capture_output=True, text=True
    )
    assert res.returncode == 1 and re.search(match, res.stdout) and len(res.stdout.splitlines()) == 1, (
        res.stdout
    )
    assert "Traceback" not in res.stderr


def test_the_profile_rule_widens_the_gripper_by_its_margin(pds: Path) -> None:
    lo, hi = PANDA.gripper.range
    set_value(pds / EP1, ACTION, 4, 7, hi + 0.9 * GRIPPER_MARGIN * (hi - lo))
    validate_dataset(pds, profiles=PROFILES)
    set_value(pds / EP1, ACTION, 4, 7, lo - 1.1 * GRIPPER_MARGIN * (hi - lo))
    with pytest.raises(
        DatasetError, match=r"field 'action'\[7\] \(gripper\) = -0\.044 at frame 4 .* gripper range"
    ):
        validate_dataset(pds, profiles=PROFILES)


def test_an_impossible_joint_is_refused_by_either_rule(pds: Path) -> None:
    set_value(pds / EP1, ACTION, 1, 0, 1e6)
    with pytest.raises(
        DatasetError, match=r"episode 1: field 'action'\[0\] \(joint1\) = 1e\+06 at frame 1 .* 'panda'"
    ):
        check_dataset(pds, profiles=PROFILES)
    with pytest.raises(
        DatasetError, match=r"episode 1: field 'action'\[0\] = 1e\+06 at frame 1.*\(outlier rule"
    ):
        check_dataset(pds)  # given no profiles (the Python API's default): the outlier rule


def test_a_profile_of_another_width_leaves_the_outlier_rule(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    with EpisodeWriter(root, EpisodeSpec(**SPEC_KW, robot_type="panda")) as w:  # 4-d state, 3-d action
        for i in range(5):
            w.add_frame(make_frame(0, i, 5))
        w.end_episode(success=True, source="scripted")
    warnings = validate_dataset(root, profiles=PROFILES).warnings
    assert "names a profile of 8 values but 'action' has 3" in " ".join(warnings)
    set_value(root / "data/chunk-000/file-000.parquet", ACTION, 0, 2, -1e6)
    with pytest.raises(
        DatasetError, match=r"episode 0: field 'action'\[2\] = -1e\+06 at frame 0.*\(outlier rule"
    ):
        validate_dataset(root, profiles=PROFILES)


def test_the_outlier_rule_keeps_odd_but_real_dimensions_and_survives_a_corrupt_episode() -> None:
    rng = np.random.default_rng(0)
    n = 300
    x = np.c_[
        rng.normal(-2.2, 0.3, n),  # a moving joint
        np.r_[np.full(n - 5, 0.04), np.zeros(5)],  # a gripper open but for 5 frames: MAD 0
        np.r_[np.zeros(n - 3), np.full(3, 2.5)],  # a joint that moves once
        np.r_[np.full(n - 10, 100.0), np.zeros(10)],  # a gripper in % (0..100)
    ]
    b = outlier_bounds(x)
    assert ((x >= b.lower) & (x <= b.upper)).all()
    x[:100, 0] = 1e6  # a whole episode of three corrupt: the medians hold
    b = outlier_bounds(x)
    assert not (x[:100, 0] <= b.upper[0]).any() and ((x[100:] >= b.lower) & (x[100:] <= b.upper)).all()


def _columns(root: Path, key: str) -> np.ndarray:
    parts = [fixed_list_to_numpy(pq.read_table(p, columns=[key]).column(key), 1) for p in data_files(root)]
    return np.concatenate(parts).astype(np.float64)


def test_sim_expert_and_rollout_datasets_pass_both_rules(tmp_path: Path) -> None:
    """DART pick-and-place demos (the finger is pushed past 'open') and policy rollouts with takeovers."""
    from sim.collect import CollectConfig, collect
    from sim.env import EnvConfig
    from sim.experts.scripted import ExpertNoise
    from sim.rollout import RolloutConfig, rollout
    from sim.tasks.base import OPEN
    from sim.teleop import TeleopConfig
    from vla.runtime.config import DeployConfig

    sys.path.insert(0, str(RUNTIME_TESTS))
    from dummy_policy import HomePolicy

    env = EnvConfig(image_size=(32, 32))
    demos, rollouts, ckpt = tmp_path / "demos", tmp_path / "rollouts", tmp_path / "home"
    noise = ExpertNoise(execute_std=0.08)
    collect(
        CollectConfig(task="pick_place", episodes=1, out=str(demos), noise=noise, env=env, progress=False)
    )
    HomePolicy([*PANDA.home, OPEN], chunk_size=10, noise_std=0.0).save(ckpt)
    deploy = DeployConfig(horizon=5)
    teleop = TeleopConfig(stall_steps=5, delay=2, length=60)
    cfg = RolloutConfig(
        checkpoint=str(ckpt), out=str(rollouts), imports=["dummy_policy"], env=env, progress=False,
        task="reach", episodes=2, workers=0, deploy=deploy, teleop=teleop,
    )  # fmt: skip
    assert rollout(cfg).intervention_frames > 0
    for root in (demos, rollouts):
        assert check_dataset(root, profiles=PROFILES).warnings == []  # the Panda profile's ranges
        validate_dataset(root)  # given no profiles: the outlier rule
        for key in (STATE, ACTION):  # with room to spare: every value within a fifth of its interval
            x = _columns(root, key)
            b = outlier_bounds(x)
            assert (np.abs(x - (b.lower + b.upper) / 2) <= 0.2 * (b.upper - b.lower) / 2).all(), (root, key)
    assert _columns(rollouts, IS_INTERVENTION).any()


def test_end_effector_data_named_panda_is_not_held_to_its_joint_ranges(tmp_path: Path) -> None:
    """LIBERO's datasets say robot_type panda over an 8-d end-effector state (metres, axis-angle, fingers)
    and 7-d end-effector commands: not joint targets, so the outlier rule checks them, not the profile."""
    root = tmp_path / "ds"
    spec = EpisodeSpec(**{**SPEC_KW, "state_dim": 8, "action_dim": 7}, robot_type="panda")
    rng = np.random.default_rng(0)
    with EpisodeWriter(root, spec) as w:
        for i in range(6):
            frame = make_frame(0, i, 6)
            state = np.r_[rng.normal(0, 0.1, 3), 2.5, -1.0, 0.3, 0.2, -0.2].astype(
                np.float32
            )  # fingers > 0.04
            action = rng.uniform(-1, 1, 7).astype(np.float32)
            w.add_frame({**frame, STATE: state, ACTION: action, "complementary_info.policy_action": action})
        w.end_episode(success=True, source="demo")
    warnings = validate_dataset(root, profiles=PROFILES).warnings
    assert "'observation.state' (8) and 'action' (7) differ in width" in " ".join(warnings)
