"""Shared fixtures for the episode-data tests: a tiny spec and deterministic synthetic frames."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_CACHE", tempfile.mkdtemp(prefix="vla_test_hf_cache_"))

from pathlib import Path
from typing import Any

import pytest
import torch
from data_helpers import write_episodes

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def good_dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[list[dict[str, Any]]]]:
    root = tmp_path_factory.mktemp("good") / "ds"
    return root, write_episodes(root, 3)
