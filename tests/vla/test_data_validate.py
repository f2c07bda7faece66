"""validate_dataset accepts a good dataset and rejects each kind of corruption with a precise message."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data_helpers import garble_past_header, set_value, write_video_episodes

from vla.data import DatasetError, load_episode, validate_dataset
from vla.data.schema import SIDECAR_FILE


@pytest.fixture
def ds(good_dataset, tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    shutil.copytree(good_dataset[0], root)
    return root


def test_accepts_good_dataset_and_cli(good_dataset) -> None:
    report = validate_dataset(good_dataset[0])
    assert (report.num_episodes, report.num_frames, report.warnings) == (3, 18, [])
    out = subprocess.run(
        [sys.executable, "-m", "vla.data.validate", str(good_dataset[0])], capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.startswith("OK"), out.stdout + out.stderr


def test_rejects_missing_feature(ds: Path) -> None:
    info_path = ds / "meta/info.json"
    info = json.loads(info_path.read_text())
    del info["features"]["observation.state"]
    info_path.write_text(json.dumps(info))
    with pytest.raises(DatasetError, match=r"info\.json: feature 'observation\.state' missing"):
        validate_dataset(ds)
    out = subprocess.run([sys.executable, "-m", "vla.data.validate", str(ds)], capture_output=True, text=True)
    assert out.returncode == 1 and "observation.state" in out.stdout


def test_rejects_wrong_declared_shape(ds: Path) -> None:
    info_path = ds / "meta/info.json"
    info = json.loads(info_path.read_text())
    info["features"]["action"]["shape"] = [5]
    info_path.write_text(json.dumps(info))
    with pytest.raises(DatasetError, match=r"feature 'action' declared shape \[5\]"):
        validate_dataset(ds)


def test_rejects_nan_action_in_parquet(ds: Path) -> None:
    path = ds / "data/chunk-000/file-001.parquet"  # episode 1
    table = pq.read_table(path)
    actions = table.column("action").to_pylist()
    actions[3][1] = float("nan")
    col = pa.array(actions, type=table.schema.field("action").type)
    table = table.set_column(table.schema.get_field_index("action"), "action", col)
    pq.write_table(table, path)
    with pytest.raises(
        DatasetError, match=r"file-001\.parquet: episode 1: field 'action' has NaN/inf at frame 3"
    ):
        validate_dataset(ds)


def test_rejects_episode_gap(ds: Path) -> None:
    (ds / "meta/episodes/chunk-000/file-001.parquet").unlink()
    (ds / "data/chunk-000/file-001.parquet").unlink()
    with pytest.raises(DatasetError, match=r"episode index gap: episode\(s\) \[1\] missing"):
        validate_dataset(ds)


def test_rejects_sidecar_mismatch(ds: Path) -> None:
    path = ds / SIDECAR_FILE
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]))
    with pytest.raises(
        DatasetError, match=r"episode\(s\) \[2\]: in lerobot's episode metadata but not in the sidecar"
    ):
        validate_dataset(ds)


def test_rejects_bad_source(ds: Path) -> None:
    path = ds / SIDECAR_FILE
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records[1]["source"] = "dream"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(DatasetError, match=r"vla_episodes\.jsonl: episode 1: field 'source' = 'dream'"):
        validate_dataset(ds)


def test_rejects_frame_index_inconsistency(ds: Path) -> None:
    path = ds / "data/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    fi = np.array(table.column("frame_index").to_pylist())
    fi[2] = 7
    table = table.set_column(table.schema.get_field_index("frame_index"), "frame_index", pa.array(fi))
    pq.write_table(table, path)
    with pytest.raises(DatasetError, match=r"episode 0: field 'frame_index'"):
        validate_dataset(ds)


# ---- values: an impossible action (the outlier rule; the profile rule is in test_data_ranges.py) ----------
def test_rejects_an_impossible_action_naming_file_episode_frame_and_field(ds: Path) -> None:
    set_value(ds / "data/chunk-000/file-001.parquet", "action", 3, 1, 1e6)  # episode 1, frame 3
    with pytest.raises(
        DatasetError,
        match=r"file-001\.parquet: episode 1: field 'action'\[1\] = 1e\+06 at frame 3 is outside the dataset "
        r"median .* \(outlier rule",
    ):
        validate_dataset(ds)


# ---- videos: each episode's first and last frame decode -------------------------------------------------
@pytest.fixture(scope="module")
def video_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_video_episodes(tmp_path_factory.mktemp("video") / "ds", n=2, length=3)


@pytest.fixture
def vds(video_dataset: Path, tmp_path: Path) -> Path:
    root = tmp_path / "vds"
    shutil.copytree(video_dataset, root)
    return root


WRIST_EP1 = "videos/observation.images.wrist/chunk-000/file-001.mp4"


def test_accepts_a_video_dataset_and_reads_its_frames(video_dataset: Path) -> None:
    report = validate_dataset(video_dataset)
    assert (report.num_episodes, report.num_frames, report.warnings) == (2, 6, [])
    frames = load_episode(video_dataset, 1, keys=["observation.images.wrist"])["observation.images.wrist"]
    assert frames.shape == (3, 32, 32, 3) and frames.dtype == np.uint8


def test_rejects_a_video_garbled_past_its_header(vds: Path) -> None:
    path = garble_past_header(vds / WRIST_EP1)
    where = rf"{re.escape(str(path))}: episode 1: field 'observation\.images\.wrist'"
    with pytest.raises(DatasetError, match=where + r": video file cannot be opened \(Could not open"):
        validate_dataset(vds)
    with pytest.raises(DatasetError, match=where + r": video cannot be decoded"):  # the reader says it too
        load_episode(vds, 1)


def test_rejects_a_video_whose_frames_do_not_decode(vds: Path) -> None:
    path = vds / WRIST_EP1
    data = path.read_bytes()
    box = data.index(b"mdat") - 4  # the mp4 box of the coded frames: 4-byte size, "mdat", payload
    start, end = box + 8, box + int.from_bytes(data[box : box + 4], "big")  # the index (moov) stays intact
    garbled = np.random.default_rng(0).integers(0, 256, end - start, dtype=np.uint8).tobytes()
    path.write_bytes(data[:start] + garbled + data[end:])
    where = rf"{re.escape(str(path))}: episode 1: field 'observation\.images\.wrist'"
    with pytest.raises(DatasetError, match=where + r": frame 0 cannot be decoded"):
        validate_dataset(vds)


def test_the_validator_answers_help_instead_of_taking_it_for_a_path():
    cmd = [sys.executable, "-m", "vla.data.validate"]
    helped = subprocess.run([*cmd, "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: python -m vla.data.validate")
    assert subprocess.run([*cmd, "--strict"], capture_output=True, text=True).returncode == 2
