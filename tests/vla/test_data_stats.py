"""Normalisation statistics: exact values on known data, safetensors round trip, Normalizer inverse."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from vla.data import Normalizer, compute_stats, load_stats, save_stats


def test_stats_match_numpy(good_dataset) -> None:
    root, written = good_dataset
    actions = np.stack([f["action"] for ep in written for f in ep]).astype(np.float64)
    stats = compute_stats(root, ["action", "observation.state", "next.reward"])
    np.testing.assert_allclose(stats["action"]["mean"], actions.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats["action"]["std"], actions.std(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(stats["action"]["min"], actions.min(0).astype(np.float32))
    np.testing.assert_allclose(stats["action"]["q99"], np.quantile(actions, 0.99, axis=0), rtol=1e-5)
    assert stats["next.reward"]["max"].shape == (1,) and stats["next.reward"]["max"][0] == 1.0
    with pytest.raises(KeyError, match=r"observation\.images\.front"):
        compute_stats(root, ["observation.images.front"])


def test_safetensors_round_trip_and_normalizer(tmp_path: Path) -> None:
    stats = {
        "action": {
            "mean": np.array([1.0, -2.0, 0.0], np.float32),
            "std": np.array([2.0, 0.5, 0.0], np.float32),  # a constant dimension
            "min": np.array([-1.0, -3.0, 5.0], np.float32),
            "max": np.array([3.0, -1.0, 5.0], np.float32),
            "q01": np.array([-0.5, -2.5, 5.0], np.float32),
            "q99": np.array([1.5, -1.5, 5.0], np.float32),
        }
    }
    path = tmp_path / "stats.safetensors"
    save_stats(path, stats)
    loaded = load_stats(path)
    for k, v in stats["action"].items():
        np.testing.assert_array_equal(loaded["action"][k], v)

    x = torch.tensor([[3.0, -2.5, 5.0], [-1.0, -1.0, 5.0]])
    for mode in ("mean_std", "min_max", "quantiles"):
        norm = Normalizer(loaded, mode)
        y = norm.normalize("action", x)
        assert torch.isfinite(y).all()
        torch.testing.assert_close(norm.unnormalize("action", y), x)
    y = Normalizer(loaded, "min_max").normalize("action", x)
    torch.testing.assert_close(y[:, :2], torch.tensor([[1.0, -0.5], [-1.0, 1.0]]))
    y = Normalizer(loaded, "quantiles").normalize("action", x)  # [q01, q99] -> [-1, 1] (LeRobot QUANTILES)
    torch.testing.assert_close(y[:, :2], torch.tensor([[2.5, -1.0], [-1.5, 2.0]]))
    torch.testing.assert_close(Normalizer(loaded).normalize("action", x)[0, :2], torch.tensor([1.0, -1.0]))
    with pytest.raises(KeyError, match=r"'observation.state'.*available keys: \['action'\]"):
        Normalizer(loaded).normalize("observation.state", x)
