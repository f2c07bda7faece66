"""Where the Hydra YAML lives, and turning a composed config into its typed dataclass."""

from __future__ import annotations

from pathlib import Path

CONFIG_DIR = str(Path(__file__).resolve().parents[1] / "configs")
