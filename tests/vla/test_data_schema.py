"""Round trip: EpisodeWriter -> lerobot LeRobotDataset / our reader, values equal what was written."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from data_helpers import SPEC_KW, make_spec, write_episodes
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from vla.data import EpisodeSpec, EpisodeWriter, load_episode, open_dataset, read_episode_info
from vla.data.schema import POLICY_ACTION


def test_spec_json_round_trip_and_features() -> None:
    spec = EpisodeSpec(**SPEC_KW, use_videos=True, state_names=["a", "b", "c", "d"])
    assert EpisodeSpec.from_json(spec.to_json()) == spec
    feats = spec.features()
    assert set(feats) == {
        "observation.images.front",
        "observation.images.wrist",
        "observation.state",
        "action",
        "complementary_info.policy_action",
        "complementary_info.is_intervention",
        "next.reward",
        "next.done",
    }
    assert feats["observation.images.front"] == {
        "dtype": "video",
        "shape": (16, 16, 3),
        "names": ["height", "width", "channels"],
    }
    assert feats["observation.state"]["names"] == ["a", "b", "c", "d"]
    with pytest.raises(ValueError, match="state_names"):
        EpisodeSpec(**SPEC_KW, state_names=["a"])


def test_round_trip_with_lerobot(good_dataset) -> None:
    root, written = good_dataset
    ds = LeRobotDataset("local/ds", root=root)
    assert ds.num_episodes == 3
    assert len(ds) == sum(len(ep) for ep in written)
    item = ds[len(written[0]) + 2]  # episode 1, frame 2
    expected = written[1][2]
    assert int(item["episode_index"]) == 1 and int(item["frame_index"]) == 2
    np.testing.assert_array_equal(item["action"].numpy(), expected["action"])
    np.testing.assert_array_equal(item[POLICY_ACTION].numpy(), expected[POLICY_ACTION])
    np.testing.assert_array_equal(item["observation.state"].numpy(), expected["observation.state"])
    img = (item["observation.images.front"].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
    np.testing.assert_array_equal(img, expected["observation.images.front"])
    assert item["task"] == "task 1"
    assert bool(item["complementary_info.is_intervention"]) == bool(
        expected["complementary_info.is_intervention"][0]
    )

    infos = read_episode_info(root)
    assert [(i.episode_index, i.length, i.success, i.source, i.task) for i in infos] == [
        (0, 5, True, "scripted", "task 0"),
        (1, 6, False, "scripted", "task 1"),
        (2, 7, True, "scripted", "task 0"),
    ]
    assert infos[2].extra == {"seed": 2}
    assert open_dataset(root).num_episodes == 3


def test_load_episode_matches_written(good_dataset) -> None:
    root, written = good_dataset
    ep = load_episode(root, 2)
    frames = written[2]
    assert ep["observation.images.wrist"].shape == (7, 16, 16, 3)
    assert ep["observation.images.wrist"].dtype == np.uint8
    for key in ("observation.images.front", "observation.images.wrist", "observation.state", "action"):
        np.testing.assert_array_equal(ep[key], np.stack([f[key] for f in frames]))
    np.testing.assert_array_equal(ep["next.done"], [f["next.done"][0] for f in frames])
    np.testing.assert_array_equal(ep["frame_index"], np.arange(7))
    assert list(ep["task"]) == ["task 0"] * 7
    only = load_episode(root, 0, keys=["action"])
    assert set(only) == {"action"} and only["action"].shape == (5, 3)
    with pytest.raises(IndexError):
        load_episode(root, 3)


def test_resume_rejects_different_spec(good_dataset, tmp_path: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(good_dataset[0], root)
    other = EpisodeSpec(**{**SPEC_KW, "action_dim": 4})
    with pytest.raises(ValueError, match=r"action_dim: 4 != 3|action_dim: 3 != 4"):
        EpisodeWriter(root, other, resume=True)
    with pytest.raises(FileExistsError):
        EpisodeWriter(root, make_spec())


def test_resume_appends(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_episodes(root, 2)
    write_episodes(root, 1, start=2, resume=True)
    assert [i.episode_index for i in read_episode_info(root)] == [0, 1, 2]
    assert LeRobotDataset("local/ds", root=root).num_episodes == 3


def test_layout_constant_matches_lerobot():
    from lerobot.datasets.utils import EPISODES_DIR

    from vla.data import layout

    assert layout.EPISODES_DIR == EPISODES_DIR  # copied to keep `import vla.checkpoint` free of lerobot
