"""What every record of a run carries: the commit (and whether the tree was dirty), the machine, the date and
the wall time of the run that produced it; the code version a cache is keyed by; and how a record is
written (:func:`record_json`: strict JSON, a NaN as ``null``).

Read from git in the checkout this package is installed from (``pip install -e``); outside a checkout the
commit reads ``unknown`` and the code version hashes empty trees.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ":!benchmarks/results"  # the records themselves do not make a tree dirty


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, cwd=ROOT)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def code_version() -> str:
    """The trees of the code that makes a checkpoint or an evaluation, plus any uncommitted diff of it: the
    part of a cache key that says which code made the cached thing."""
    dirs = ["vla", "policies", "training", "sim", "configs", "hardware"]
    trees = " ".join(_git("rev-parse", f"HEAD:{d}") for d in dirs)
    diff = _git("diff", "HEAD", "--", *dirs)
    return hashlib.sha1(f"{trees}\n{diff}".encode()).hexdigest()[:12]


def _cpu_model() -> str:
    """The CPU's model name (Linux; "" where unknown): machines with the same core count differ 2-3x."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")


def provenance(started: float) -> dict[str, Any]:
    """``started``: ``time.time()`` when the run began."""
    return {
        "commit": _git("rev-parse", "HEAD") or "unknown",
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", RECORDS)),
        "machine": {
            "arch": platform.machine(),
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "cpu_model": _cpu_model(),
            "python": platform.python_version(),
        },
        "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(started)),
        "wall_minutes": round((time.time() - started) / 60, 2),
    }


def record_json(obj: Any) -> str:
    """``obj`` as strict JSON (indented, newline-terminated): NaN and infinities (a time to success without
    a success) become ``null``, which every JSON reader accepts; Python's default ``NaN`` is not JSON."""
    return json.dumps(_finite(obj), indent=2, allow_nan=False) + "\n"


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x
