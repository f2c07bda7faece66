"""Command-line entry points (Hydra)."""

from pathlib import Path

CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "configs")
