"""validate_dataset accepts a good dataset and rejects each kind of corruption with a precise message."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vla.data import DatasetError, validate_dataset
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
