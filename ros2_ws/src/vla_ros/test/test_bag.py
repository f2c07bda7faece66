"""A rosbag2 recording of a live deployment (made here, as ``ros2 bag record`` would: serialized CDR
messages with their receive times, MCAP and sqlite3) converted by ``vla-bag2dataset`` into a validated
dataset episode."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from ros_helpers import ARM_CAMERA, TOPICS, BagRecorder, wait_for


def test_a_recorded_deployment_converts_to_a_valid_dataset(deployment, tmp_path):
    from vla.data.validate import validate_dataset

    d = deployment(instruction="reach the red ball", max_steps=30)
    d.up()
    bags = {"mcap": tmp_path / "bag_mcap", "sqlite3": tmp_path / "bag_sqlite3"}
    recorder = BagRecorder(d.client, bags)  # recording from here on, as `ros2 bag record` would
    node = d.client.node
    wait_for(lambda: all(node.count_publishers(t) for t in TOPICS), 20, "every recorded topic's publisher")
    wait_for(lambda: {"/joint_states", ARM_CAMERA} <= recorder.topics(), 20, "recorded joint states, frames")
    state = d.episode()
    recorder.close()
    assert state["last_success"] == "true", state
    missing = set(TOPICS) - recorder.topics()
    assert not missing, missing
    assert list((tmp_path / "bag_mcap").glob("*.mcap")) and list((tmp_path / "bag_sqlite3").glob("*.db3"))

    steps = int(state["last_steps"])
    for kind, bag in bags.items():
        out = tmp_path / f"dataset_{kind}"
        cmd = [
            str(Path(sys.executable).parent / "vla-bag2dataset"),
            f"bag={bag}",
            "profile=panda",
            f"out={out}",
            "success_topic=/sim_robot/success",
            "instruction=reach the red ball",
            "progress=false",
        ]
        res = subprocess.run(cmd, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr[-2000:]
        assert "validated" in res.stdout
        report = validate_dataset(out)
        assert report.num_episodes == 1
        # the bag spans the episode and a little before and after it (the sim's idle periods)
        assert steps <= report.num_frames <= steps + 40, (steps, report.num_frames)
        frames = _table(out)
        assert frames["observation.state"].shape[1] == 8
        assert not frames["complementary_info.is_intervention"].any()
        # where the policy acted, the executed arm command is its proposal (the safety layer passed it)
        acted = np.abs(frames["complementary_info.policy_action"] - frames["action"]).max(axis=1) < 1e-5
        assert acted.sum() >= steps // 2, acted
        success = _sidecar_success(out)
        assert success == [True]


def _table(root: Path) -> dict[str, np.ndarray]:
    import pyarrow.parquet as pq

    table = pq.read_table(sorted((root / "data").rglob("*.parquet"))[0]).to_pydict()
    return {
        k: np.asarray(v, dtype=np.float64)
        for k, v in table.items()
        if not k.startswith(("observation.images", "task"))
    }


def _sidecar_success(root: Path) -> list[bool]:
    from vla.data.sidecar import read_sidecar

    return [bool(r.success) for r in read_sidecar(root)]
