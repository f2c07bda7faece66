"""What every benchmark record carries (:mod:`vla.provenance`: the commit, the machine, the date and the wall
time), and where the records go."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vla.provenance import ROOT, code_version, provenance, record_json

RESULTS = ROOT / "benchmarks" / "results"
__all__ = ["RESULTS", "ROOT", "code_version", "provenance", "write_record"]


def write_record(name: str, record: dict[str, Any], started: float) -> Path:
    """``benchmarks/results/<name>.json``: the record plus its provenance."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(record_json({**record, **provenance(started)}))
    return path
