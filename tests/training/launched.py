"""`vla-train` in one process or under `torchrun`, and what its runs wrote (the DDP and FSDP tests)."""

import os
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

BIN = Path(sys.executable).parent
COMMON = ["experiment=debug", "batch_size=8", "threads=1", "progress=false", "log_every=1", "save_every=100"]


def run(args: list[str], cwd: Path, ranks: int = 1) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if ranks == 1:
        cmd = [str(BIN / "vla-train"), *args]
    else:  # the launcher users run: torchrun starts the processes and sets RANK / WORLD_SIZE
        cmd = [str(BIN / "torchrun"), "--standalone", "--nproc_per_node", str(ranks)]
        cmd += ["-m", "training.scripts.train", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout


def losses(run: Path, scalar: str = "loss") -> list[float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tb")).Reload()
    return [e.value for e in events.Scalars(f"train/{scalar}")]


def weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run / "checkpoints/last/model.safetensors"))


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    """The same weights up to summation order: Adam divides a near-zero gradient (a conv bias under a norm
    layer) by its own tiny scale, so such a tensor may move by up to a step's size (lr); all others agree."""
    close = [k for k in a if torch.allclose(a[k], b[k], atol=1e-5)]
    assert len(close) >= 0.9 * len(a), sorted(set(a) - set(close))
    assert all(torch.allclose(a[k], b[k], atol=2e-3) for k in a)
