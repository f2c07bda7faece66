"""Compaction (vla/data/compact.py): per-episode files repacked into LeRobot v3's packed layout, the same
episodes frame for frame, readable by our reader and LeRobot's LeRobotDataset; a compaction killed midway
leaves the original as it was; `vla-collect ... compact=true` packs at the end of a collection."""

import hashlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from vla.data import load_episode
from vla.data.compact import compact, file_count
from vla.data.reader import read_episode_info
from vla.data.writer import EpisodeWriter

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))
from toy_episodes import SPEC, toy_frame, write_toy_episodes

BIN = Path(sys.executable).parent


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


def _episodes(root: Path) -> list[dict]:
    return [load_episode(root, i.episode_index) for i in read_episode_info(root)]


def _same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert set(x) == set(y)
        for k in x:
            if isinstance(x[k], np.ndarray):
                assert np.array_equal(x[k], y[k]), k


def test_compaction_packs_the_files_and_keeps_every_frame(tmp_path):
    root = write_toy_episodes(tmp_path / "toy", n=12)
    before, infos = _episodes(root), read_episode_info(root)
    n_files = file_count(root)
    report = compact(root, data_mb=100)
    assert report.files_before == n_files == 30 and report.files_after == 8, report.line()
    assert len(list((root / "data").rglob("*.parquet"))) == 1  # 12 episodes' parquets -> one file
    assert len(list((root / "meta/episodes").rglob("*.parquet"))) == 1
    assert read_episode_info(root) == infos  # outcomes, sources, tasks, extras: the sidecar came along
    _same(before, _episodes(root))
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset("local/toy", root=root)
    assert ds.num_episodes == 12 and len(ds) == sum(i.length for i in infos)
    assert not list(tmp_path.glob(".toy.*compact*"))  # no copy or swapped-out original left behind
    # the packed dataset takes new episodes like any other
    img = np.full((32, 32, 3), 200, np.uint8)
    with EpisodeWriter(root, SPEC, resume=True) as w:
        for t in range(9):
            w.add_frame(toy_frame(img, np.ones(8), np.ones(8), False, float(t == 8), t == 8, "toy task"))
        w.end_episode(success=True, source="policy")
    assert len(read_episode_info(root)) == 13
    _same(before, _episodes(root)[:12])


def test_a_compaction_killed_midway_leaves_the_original_readable(tmp_path):
    root = write_toy_episodes(tmp_path / "toy", n=12)
    tree, before = _tree(root), _episodes(root)
    proc = subprocess.Popen(
        [str(BIN / "vla-compact"), str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    building = tmp_path / ".toy.compacting"
    deadline = time.time() + 120
    while not building.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert building.exists(), "the packed copy never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _tree(root) == tree  # not a byte of the original changed
    _same(before, _episodes(root))
    res = subprocess.run([str(BIN / "vla-compact"), str(root)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "unfinished packed copy" in res.stdout and "files: " in res.stdout
    _same(before, _episodes(root))


@pytest.mark.slow
def test_collect_packs_at_the_end_when_asked(tmp_path):
    out = tmp_path / "reach"
    cmd = [str(BIN / "vla-collect"), "task=reach", "episodes=3", f"out={out}", "env.image_size=[32,32]"]
    res = subprocess.run(
        [*cmd, "compact=true", "progress=false"], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "files: " in res.stdout and len(list((out / "data").rglob("*.parquet"))) == 1
