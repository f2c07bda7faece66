"""EpisodeWriter input validation and crash safety (SIGKILL a real collecting process, then resume)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from data_helpers import make_frame, make_spec
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from vla.data import EpisodeWriter, load_episode, read_episode_info, validate_dataset
from vla.lock import FolderBusyError


def test_rejects_nan_action_before_buffering(tmp_path: Path) -> None:
    with EpisodeWriter(tmp_path / "ds", make_spec()) as w:
        w.add_frame(make_frame(0, 0, 3))
        bad = make_frame(0, 1, 3)
        bad["action"] = np.array([0.0, np.nan, 1.0], dtype=np.float32)
        with pytest.raises(ValueError, match=r"episode 0, frame 1\): field 'action' has non-finite values"):
            w.add_frame(bad)
        assert w.num_pending_frames == 1
        wrong = make_frame(0, 1, 3)
        wrong["observation.state"] = np.zeros(5, dtype=np.float32)
        with pytest.raises(ValueError, match=r"field 'observation.state' must have shape \(4,\)"):
            w.add_frame(wrong)
        missing = make_frame(0, 1, 3)
        del missing["next.done"]
        with pytest.raises(ValueError, match=r"missing fields \['next.done'\]"):
            w.add_frame(missing)
        with pytest.raises(ValueError, match="source 'dream'"):
            w.end_episode(True, "dream")
        assert w.end_episode(True, "demo") == 0
        w.add_frame(make_frame(1, 0, 3))
        w.discard_episode()
        w.add_frame(make_frame(1, 0, 3))
        assert w.end_episode(False, "human", {"init_state": [0.1, 0.2]}) == 1
    ep = load_episode(tmp_path / "ds", 0)
    assert np.isfinite(ep["action"]).all() and len(ep["action"]) == 1
    assert validate_dataset(tmp_path / "ds").num_episodes == 2


COLLECTOR = textwrap.dedent(
    """
    import sys, torch
    torch.set_num_threads(1)
    sys.path.insert(0, {tests_dir!r})
    from data_helpers import make_frame, make_spec
    from vla.data import EpisodeWriter
    w = EpisodeWriter({root!r}, make_spec())
    e = 0
    while True:
        n = 6 + e % 4
        for i in range(n):
            w.add_frame(make_frame(e, i, n))
        w.end_episode(success=True, source="scripted", extra={{"seed": e}})
        e += 1
    """
)


def _sidecar_lines(root: Path) -> int:
    path = root / "meta/vla_episodes.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.parametrize("delay_s", [0.0, 0.05])
def test_sigkill_then_resume(tmp_path: Path, delay_s: float) -> None:
    root = tmp_path / "ds"
    code = COLLECTOR.format(tests_dir=str(Path(__file__).parent), root=str(root))
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while _sidecar_lines(root) < 2:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "collector too slow"
            time.sleep(0.01)
        time.sleep(delay_s)  # land somewhere inside the next episode(s)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    committed = _sidecar_lines(root)
    assert committed >= 2

    with EpisodeWriter(root, make_spec(), resume=True) as w:
        assert w.num_episodes == committed
        for e in range(committed, committed + 2):
            for i in range(4):
                w.add_frame(make_frame(e, i, 4))
            assert w.end_episode(success=False, source="policy") == e

    total = committed + 2
    ds = LeRobotDataset("local/ds", root=root)
    assert ds.num_episodes == total
    assert [i.episode_index for i in read_episode_info(root)] == list(range(total))
    report = validate_dataset(root)
    assert report.num_episodes == total
    for e in range(committed):  # the pre-crash episodes are intact
        n = 6 + e % 4
        ep = load_episode(root, e)
        expected = [make_frame(e, i, n) for i in range(n)]
        np.testing.assert_array_equal(ep["action"], np.stack([f["action"] for f in expected]))
        np.testing.assert_array_equal(
            ep["observation.images.wrist"],
            np.stack([f["observation.images.wrist"] for f in expected]),
        )
    assert len(load_episode(root, total - 1)["action"]) == 4


MID_SAVE_CRASH = textwrap.dedent(
    """
    import os, signal, sys, torch
    torch.set_num_threads(1)
    sys.path.insert(0, {tests_dir!r})
    from data_helpers import make_frame, make_spec
    from vla.data import EpisodeWriter
    w = EpisodeWriter({root!r}, make_spec(), resume=True)
    for i in range(5):
        w.add_frame(make_frame(2, i, 5))
    w.dataset.save_episode()  # lerobot wrote the episode (unclosed parquet, info.json counts it) ...
    {extra}
    os.kill(os.getpid(), signal.SIGKILL)  # ... but the sidecar commit never happened
    """
)


@pytest.mark.parametrize("closed", [False, True])
def test_kill_inside_save_episode_is_rolled_back(tmp_path: Path, closed: bool) -> None:
    root = tmp_path / "ds"
    with EpisodeWriter(root, make_spec()) as w:
        for e in range(2):
            for i in range(5):
                w.add_frame(make_frame(e, i, 5))
            w.end_episode(True, "demo")
    extra = "w._close_lerobot_files()  # files complete, still no commit" if closed else ""
    code = MID_SAVE_CRASH.format(tests_dir=str(Path(__file__).parent), root=str(root), extra=extra)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()

    with EpisodeWriter(root, make_spec(), resume=True) as w:
        report = "\n".join(w.recovery_report)
        assert "data/chunk-000/file-002.parquet" in report  # the uncommitted episode's data file
        assert "totals 3 episodes" in report
        if closed:
            assert "meta/episodes/chunk-000/file-002.parquet: dropped uncommitted episode(s) [2]" in report
        assert w.num_episodes == 2
        for i in range(3):
            w.add_frame(make_frame(9, i, 3))
        assert w.end_episode(False, "policy") == 2
    assert validate_dataset(root).num_frames == 13
    assert LeRobotDataset("local/ds", root=root).num_episodes == 3
    np.testing.assert_array_equal(load_episode(root, 2)["action"][0], make_frame(9, 0, 3)["action"])


HOLD_LOCK = textwrap.dedent(
    """
    import sys, time
    from vla.lock import folder_lock
    with folder_lock({root!r}, "a test's other writer"):
        print("held", flush=True)
        time.sleep(600)
    """
)


def test_one_writer_per_dataset(tmp_path: Path) -> None:
    """A second writer on a dataset is refused by name while the first is open, in this process or another;
    the lock goes with its holder (closed, or killed) and the data stays whole."""
    root = tmp_path / "ds"
    with EpisodeWriter(root, make_spec()) as w:
        w.add_frame(make_frame(0, 0, 2))
        w.add_frame(make_frame(0, 1, 2))
        w.end_episode(True, "demo")
        busy = rf"{root} is in use by pid {os.getpid()} \(writing episodes\)"
        with pytest.raises(FolderBusyError, match=busy):
            EpisodeWriter(root, make_spec(), resume=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK.format(root=str(root))], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(FolderBusyError, match=rf"pid {proc.pid} \(a test's other writer\)"):
            EpisodeWriter(root, make_spec(), resume=True)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with EpisodeWriter(root, make_spec(), resume=True) as w:  # the killed holder left no stale lock
        assert w.num_episodes == 1
    assert validate_dataset(root).num_episodes == 1
