"""LeRobot's own Robot and Teleoperator classes under our runtime, through ``hardware/lerobot*.py``.

No hardware is attached here, so the LeRobot devices are real subclasses of LeRobot's abstract bases written
in this file: a follower backed by our MuJoCo Panda (``TabletopEnv``) speaking LeRobot's units (joints in
degrees, gripper 0..100, two cameras), a leader arm replaying a trajectory, and a gamepad with a scripted
intervention button. Everything of ours is the real thing (stack, safety layer, loop, recorder, IK).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest
from lerobot.motors import Motor, MotorNormMode
from lerobot.robots.config import RobotConfig
from lerobot.robots.robot import Robot as LeRobotBase
from lerobot.teleoperators.config import TeleoperatorConfig
from lerobot.teleoperators.teleoperator import Teleoperator as TeleoperatorBase
from lerobot.teleoperators.utils import TeleopEvents

import sim  # noqa: F401  (before any mujoco import: picks the GL backend)
from hardware.lerobot import LeRobotJointMap, LeRobotRobot, LeRobotTeleop, LeRobotTeleopConfig
from hardware.profiles import PROFILES
from sim.env import EnvConfig, TabletopEnv
from sim.robot import SimRobot
from sim.teleop_devices import PandaEEMap, make_device_teleoperator
from vla.data.schema import ACTION, IS_INTERVENTION, POLICY_ACTION, STATE, image_key
from vla.robot import CameraSpec
from vla.runtime.config import DeployConfig
from vla.runtime.loop import run_episode
from vla.runtime.safety import SafetyConfig
from vla.runtime.stack import build_stack
from vla.runtime.subscribers import FrameRecorder

PANDA = PROFILES.get("panda")
OPEN = PANDA.gripper.open  # m per finger
HOME = np.r_[PANDA.home, OPEN]
JOINT_KEYS = [f"{j}.pos" for j in PANDA.joints]
MAP = LeRobotJointMap.for_profile(PANDA, gripper_range=(0.0, 100.0))  # LeRobot's gripper: 0..100
TARGET = np.r_[np.array(PANDA.home) + [0.25, 0.2, 0.0, 0.2, 0.0, -0.15, 0.0], 0.02]  # tool inside the box
CHUNK = 10


# ---- LeRobot devices (real subclasses of LeRobot's bases) --------------------------------------------------
@dataclass(kw_only=True)
class SimFollowerConfig(RobotConfig):
    use_degrees: bool = True
    image_size: tuple[int, int] = (32, 32)


class SimFollower(LeRobotBase):
    """The MuJoCo Panda as LeRobot's SOFollower presents an arm: ``<joint>.pos`` in degrees (its motors on a
    bus in ``MotorNormMode.DEGREES``, or RANGE_M100_100 with ``use_degrees=False``), ``gripper.pos`` 0..100,
    one HxWx3 uint8 image per camera. ``send_action`` runs one control period of the sim."""

    config_class = SimFollowerConfig
    name = "sim_panda_follower"
    cameras = ("agentview", "wrist")

    def __init__(self, config: SimFollowerConfig) -> None:
        super().__init__(config)
        self.config = config
        mode = MotorNormMode.DEGREES if config.use_degrees else MotorNormMode.RANGE_M100_100
        motors = {j: Motor(i + 1, "sim", mode) for i, j in enumerate(PANDA.joints)}
        self.bus = SimpleNamespace(motors={**motors, "gripper": Motor(8, "sim", MotorNormMode.RANGE_0_100)})
        self.env: TabletopEnv | None = None
        self.sent: list[dict] = []

    @property
    def observation_features(self) -> dict:
        h, w = self.config.image_size
        return {**self.action_features, **{c: (h, w, 3) for c in self.cameras}}

    @property
    def action_features(self) -> dict:
        return {f"{m}.pos": float for m in self.bus.motors}

    @property
    def is_connected(self) -> bool:
        return self.env is not None

    def connect(self, calibrate: bool = True) -> None:
        cfg = EnvConfig(task="reach", image_size=self.config.image_size, terminate_on_success=False)
        self.env = TabletopEnv(cfg)
        self._obs, _ = self.env.reset(seed=0)

    @property
    def is_calibrated(self) -> bool:
        return True

    def calibrate(self) -> None:
        pass

    def configure(self) -> None:
        pass

    def get_observation(self) -> dict:
        state = self._obs["state"]
        out = {k: math.degrees(float(state[i])) for i, k in enumerate(JOINT_KEYS)}
        out["gripper.pos"] = float(state[7]) / OPEN * 100.0
        return {**out, **{c: self._obs[c] for c in self.cameras}}

    def send_action(self, action: dict) -> dict:
        assert self.env is not None
        self.sent.append(dict(action))
        q = [math.radians(action[k]) for k in JOINT_KEYS]
        self._obs, *_ = self.env.step(np.r_[q, action["gripper.pos"] / 100.0 * OPEN])
        return action

    def disconnect(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


@dataclass(kw_only=True)
class LeaderConfig(TeleoperatorConfig):
    use_degrees: bool = True


class _ScriptedDevice(TeleoperatorBase):
    """The parts of a LeRobot teleoperator that scripted devices share (no bus, no calibration)."""

    def __init__(self, config: TeleoperatorConfig) -> None:
        super().__init__(config)
        self.config, self.connected, self.k = config, False, 0

    @property
    def feedback_features(self) -> dict:
        return {}

    @property
    def is_connected(self) -> bool:
        return self.connected

    def connect(self, calibrate: bool = True) -> None:
        self.connected = True

    @property
    def is_calibrated(self) -> bool:
        return True

    def calibrate(self) -> None:
        pass

    def configure(self) -> None:
        pass

    def send_feedback(self, feedback: dict) -> None:
        pass

    def disconnect(self) -> None:
        self.connected = False


class ScriptedLeader(_ScriptedDevice):
    """A leader arm as SOLeader reports one (``<joint>.pos`` degrees, ``gripper.pos`` 0..100), replaying a
    trajectory: joint1 +1 deg per period from home, the gripper closing from 100 by 5 per period."""

    config_class = LeaderConfig
    name = "scripted_leader"

    @property
    def action_features(self) -> dict:
        return {k: float for k in [*JOINT_KEYS, "gripper.pos"]}

    def row(self, k: int) -> dict:
        deg = np.degrees(PANDA.home) + [k + 1.0, 0, 0, 0, 0, 0, 0]
        return {**dict(zip(JOINT_KEYS, deg.tolist(), strict=True)), "gripper.pos": 100.0 - 5.0 * k}

    def get_action(self) -> dict:
        self.k += 1
        return self.row(self.k - 1)


@dataclass(kw_only=True)
class PadConfig(TeleoperatorConfig):
    window: tuple[int, int] = (5, 15)  # periods with the intervention button held and the stick at +x
    close_from: int = 10  # the close-gripper button from this period on (inside the window)


class ScriptedGamepad(_ScriptedDevice):
    """A gamepad in GamepadTeleop's format (``delta_x/y/z``, ``gripper`` 0 close / 1 stay / 2 open, events
    keyed by ``TeleopEvents``); a period is one ``get_action`` + ``get_teleop_events``, as LeRobot reads."""

    config_class = PadConfig
    name = "scripted_gamepad"

    @property
    def action_features(self) -> dict:
        return {
            "dtype": "float32",
            "shape": (4,),
            "names": {"delta_x": 0, "delta_y": 1, "delta_z": 2, "gripper": 3},
        }

    def _inside(self) -> bool:
        return self.config.window[0] <= self.k < self.config.window[1]

    def get_action(self) -> dict:
        inside = self._inside()
        close = inside and self.k >= self.config.close_from
        return {
            "delta_x": 1.0 if inside else 0.0,
            "delta_y": 0.0,
            "delta_z": 0.0,
            "gripper": 0 if close else 1,
        }

    def get_teleop_events(self) -> dict:
        inside = self._inside()
        self.k += 1
        return {
            TeleopEvents.IS_INTERVENTION: inside,
            TeleopEvents.TERMINATE_EPISODE: False,
            TeleopEvents.SUCCESS: False,
            TeleopEvents.RERECORD_EPISODE: False,
        }


# ---- helpers -----------------------------------------------------------------------------------------------
def toward(target: np.ndarray, step: float = 0.05):
    """A policy: a chunk [H, 8] from the measured state toward ``target``, ``step`` rad per period at most."""

    def sample(obs: dict) -> np.ndarray:
        s = np.asarray(obs["state"], dtype=np.float64)
        k = np.arange(1, CHUNK + 1)[:, None]
        return s + np.clip(target - s, -step * k, step * k)

    return sample


def stack_for(sample, safety: str = "hold"):
    cfg = DeployConfig(horizon=5, safety=SafetyConfig(mode=safety, stale_after_s=1.0))
    return build_stack(cfg, sample, profile=PANDA, chunk_size=CHUNK)


def column(frames: list[dict], key: str) -> np.ndarray:
    return np.stack([np.asarray(f[key]) for f in frames])


@pytest.fixture
def follower(tmp_path):
    device = SimFollower(SimFollowerConfig(id="test", calibration_dir=tmp_path))
    device.connect()
    yield device
    device.disconnect()


@pytest.fixture
def sim_robot():
    env = TabletopEnv(EnvConfig(task="reach", render=False, max_steps=100, terminate_on_success=False))
    robot = SimRobot(env, PANDA)
    yield robot
    robot.close()


# ---- LeRobotRobot ------------------------------------------------------------------------------------------
def test_lerobot_robot_runs_under_the_runtime_and_reaches_the_target(follower):
    robot = LeRobotRobot(follower, PANDA, MAP, instruction="reach")
    rec = FrameRecorder(PANDA.camera_names)
    result = run_episode(robot, stack_for(toward(TARGET)), max_steps=25, subscribers=[rec])
    assert result.fault is None and result.steps == 25 and result.success is None
    obs = robot.observe()
    np.testing.assert_allclose(obs.joints, TARGET[:7], atol=0.01)  # rad, read back from degrees
    assert obs.gripper == pytest.approx(TARGET[7], abs=1e-3)  # m, read back from 0..100
    sent = follower.sent[-1]  # what went to the LeRobot robot: degrees and 0..100
    np.testing.assert_allclose([sent[k] for k in JOINT_KEYS], np.degrees(TARGET[:7]), atol=1e-3)
    assert sent["gripper.pos"] == pytest.approx(50.0, abs=1e-3)
    frame = rec.frames[0]
    assert frame[image_key("wrist")].shape == (32, 32, 3) and frame[image_key("wrist")].dtype == np.uint8
    np.testing.assert_allclose(frame[STATE], HOME, atol=1e-3)
    assert obs.image_stamps == {"agentview": obs.joint_stamp, "wrist": obs.joint_stamp}
    assert obs.joint_stamp <= robot.now() and obs.instruction == "reach"


def test_safety_holds_on_a_nan_policy_and_hold_keeps_the_arm_still(follower):
    calls: list[int] = []

    def sample(obs: dict) -> np.ndarray:  # the first chunk moves, the second is NaN
        calls.append(1)
        chunk = toward(TARGET)(obs)
        return chunk if len(calls) == 1 else np.full_like(chunk, np.nan)

    robot = LeRobotRobot(follower, PANDA, MAP)
    rec = FrameRecorder([])
    result = run_episode(robot, stack_for(sample), max_steps=15, subscribers=[rec])
    assert result.fault is not None and "NonFiniteChunkError" in result.fault
    state = np.r_[column(rec.frames, STATE), robot.observe().state[None]]  # [16, 8]
    assert abs(state[5, 0] - state[0, 0]) > 0.15  # the arm was moving when the second chunk came
    held = np.r_[state[5, :7], TARGET[7]]  # the joints measured at the fault, the last gripper command
    np.testing.assert_allclose(column(rec.frames[5:], ACTION), np.tile(held, (10, 1)), atol=1e-6)
    assert all(s == follower.sent[5] for s in follower.sent[5:])  # hold() sends one latched command
    np.testing.assert_allclose([follower.sent[5][k] for k in JOINT_KEYS], np.degrees(held[:7]), atol=1e-3)
    np.testing.assert_allclose(state[6:, :7], np.tile(held[:7], (10, 1)), atol=0.03)  # stopped there
    assert np.abs(np.diff(state[-4:, :7], axis=0)).max() < 2e-3  # and stays still


@pytest.mark.parametrize(
    ("profile", "mapping", "missing"),
    [
        (dataclasses.replace(PANDA, cameras=(CameraSpec("agentview"), CameraSpec("front"))), MAP, "front"),
        (PANDA, dataclasses.replace(MAP, joint_keys=(*JOINT_KEYS[:6], "joint7.position")), "joint7.position"),
    ],
)
def test_a_missing_key_is_refused_naming_it_and_the_available_ones(tmp_path, profile, mapping, missing):
    device = SimFollower(SimFollowerConfig(id="test", calibration_dir=tmp_path))
    with pytest.raises(ValueError, match=f"lacks \\['{missing}'\\]") as err:
        LeRobotRobot(device, profile, mapping)
    assert "'joint7.pos'" in str(err.value) and "LeRobotJointMap" in str(err.value)


def test_normalised_joint_mode_is_refused(tmp_path):
    device = SimFollower(SimFollowerConfig(id="test", calibration_dir=tmp_path, use_degrees=False))
    with pytest.raises(ValueError, match=r"RANGE_M100_100.*use_degrees=True"):
        LeRobotRobot(device, PANDA, MAP)
    leader = ScriptedLeader(LeaderConfig(id="test", calibration_dir=tmp_path, use_degrees=False))
    with pytest.raises(ValueError, match="use_degrees=True"):
        LeRobotTeleop(leader, PANDA, LeRobotTeleopConfig(kind="joints"), mapping=MAP)


# ---- LeRobotTeleop on the sim arm --------------------------------------------------------------------------
def test_leader_arm_drives_the_sim_arm_and_every_period_is_an_intervention(sim_robot, tmp_path):
    leader = ScriptedLeader(LeaderConfig(id="test", calibration_dir=tmp_path))
    leader.connect()
    teleop = LeRobotTeleop(leader, PANDA, LeRobotTeleopConfig(kind="joints"), mapping=MAP)
    assert not teleop.use_events  # no get_teleop_events: a leader arm is in control whenever it is used
    rec = FrameRecorder([])
    result = run_episode(
        sim_robot,
        stack_for(lambda obs: np.tile(HOME, (CHUNK, 1))),
        teleop=teleop,
        max_steps=15,
        subscribers=[rec],
    )
    assert result.fault is None and (result.takeovers, result.intervention_steps) == (1, 15)
    assert column(rec.frames, IS_INTERVENTION).all()
    rows = [leader.row(k) for k in range(15)]
    device = np.array(
        [[math.radians(r[k]) for k in JOINT_KEYS] + [r["gripper.pos"] / 100 * OPEN] for r in rows]
    )
    np.testing.assert_allclose(column(rec.frames, ACTION), device, atol=1e-6)  # what ran is the leader's
    np.testing.assert_allclose(column(rec.frames, POLICY_ACTION), np.tile(HOME, (15, 1)), atol=1e-6)
    assert sim_robot.observe().joints[0] == pytest.approx(device[-1, 0], abs=0.02)  # the arm followed


def test_gamepad_takes_over_in_its_window_and_moves_the_tool_plus_x(sim_robot, tmp_path):
    pad = ScriptedGamepad(PadConfig(id="test", calibration_dir=tmp_path))
    pad.connect()
    cfg = LeRobotTeleopConfig(kind="ee_delta", delta_scale=0.01)
    teleop = LeRobotTeleop(pad, PANDA, cfg, ee_to_joints=PandaEEMap(PANDA))
    rec = FrameRecorder([])
    result = run_episode(
        sim_robot,
        stack_for(lambda obs: np.tile(HOME, (CHUNK, 1))),
        teleop=teleop,
        max_steps=20,
        subscribers=[rec],
    )
    assert result.fault is None and (result.takeovers, result.intervention_steps) == (1, 10)
    human = column(rec.frames, IS_INTERVENTION).reshape(-1).astype(bool)
    assert np.flatnonzero(human).tolist() == list(range(5, 15))  # exactly the engaged window
    action, proposal = column(rec.frames, ACTION), column(rec.frames, POLICY_ACTION)
    np.testing.assert_allclose(proposal, np.tile(HOME, (20, 1)), atol=1e-6)
    np.testing.assert_allclose(action[~human], proposal[~human])
    # what ran in the window is the pad's: a tool target 1 cm further along +x each period, through the IK
    fk = PANDA.kinematics.tool_position
    tool = np.array([fk(a[:7]) for a in action[human]])
    assert np.diff(tool[:, 0]).mean() == pytest.approx(0.01, abs=2e-3)
    assert np.abs(tool[:, 1:] - tool[0, 1:]).max() < 0.01
    np.testing.assert_allclose(action[5:10, 7], OPEN, atol=1e-3)  # "stay": the opening at the takeover
    np.testing.assert_allclose(action[10:15, 7], PANDA.gripper.closed)  # the close button
    state = column(rec.frames, STATE)
    moved = fk(state[14, :7].astype(np.float64)) - fk(state[5, :7].astype(np.float64))
    assert moved[0] > 0.06 and np.abs(moved[1:]).max() < 0.02  # the sim tool went +x


def test_device_teleoperators_say_what_is_missing(sim_robot, tmp_path):
    with pytest.raises(ValueError, match="use one of"):
        make_device_teleoperator("joystick", sim_robot)
    with pytest.raises(ValueError, match="'port'"):
        make_device_teleoperator("so101_leader", sim_robot, calibration_dir=tmp_path)
    if importlib.util.find_spec("pygame") is None:  # with pygame a gamepad might really be attached
        with pytest.raises(RuntimeError, match=r"'gamepad' did not connect .*pygame"):
            make_device_teleoperator("gamepad", sim_robot, calibration_dir=tmp_path)
