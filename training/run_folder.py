"""A ``vla-train`` run's folder: its default name, whether it may be resumed, its log, its scalars.

- :func:`default_out`: without ``out=`` every run gets a new folder, ``outputs/train/<date>/<time>_<name>``
  (name: the ``experiment=`` preset, else the algorithm; ``_<job>`` appended in a ``-m`` sweep; ``_1``,
  ``_2``, ... when that folder is taken), so two runs never share one by accident.
- :func:`check_resume`: a folder that holds ``checkpoints/last`` is resumed only by a run with the same
  resolved config, up to :data:`NOT_THE_RESULT`; any other difference is refused with one line naming the
  keys and both values (before any folder, lock or log is made). ``resume=false`` starts over in it.
- :func:`run_log`: ``<out>/train.log`` holds the lines the run prints (stdout and stderr, not the progress
  bars' redraws).
- :class:`LazyScalars` and :func:`start_wandb`: TensorBoard folders made at the first scalar (the critics'
  fitting logs through one), and the optional W&B mirror of every TensorBoard scalar.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from vla.checkpoint import TRAIN_STATE_DIR
from vla.checks import check_checkpoint, read_safetensors_header
from vla.errors import InputError
from vla.lock import lock_path

TRAIN_ROOT = "outputs/train"
LOG_FILE = "train.log"
# Keys that do not change what a run trains: a folder trained with other values of these is resumed as the
# same run. ``steps`` is not one of them: the learning-rate schedule spans ``steps``, so a longer run is not
# the shorter one continued; stop early and go on with ``stop_after=`` or ``max_minutes=`` instead.
NOT_THE_RESULT = frozenset(
    {
        "out",  # a moved folder is the same run
        "resume",
        "progress",
        "threads",
        "device",
        "fsdp",  # how the weights are laid out across processes, not what they become
        "log_every",
        "save_every",
        "keep_last",
        "stop_after",
        "max_minutes",
        "env.workers",
        "wandb",
        "loop.final_rollouts",  # a measurement after the last round, not part of any round's training
    }
)


# ---- the folder -------------------------------------------------------------------------------------------
def default_out(
    name: str, job: int | None = None, *, now: datetime | None = None, root: str = TRAIN_ROOT
) -> str:
    """``<root>/<YYYY-MM-DD>/<HH-MM-SS>_<name>[_<job>]``, or with ``_1``, ``_2``, ... if that one is taken."""
    now = now or datetime.now()
    base = Path(root) / f"{now:%Y-%m-%d}" / f"{now:%H-%M-%S}_{name}{'' if job is None else f'_{job}'}"
    path, i = base, 0
    while path.exists() or lock_path(path).exists():  # a folder another run has just locked counts as taken
        i += 1
        path = base.with_name(f"{base.name}_{i}")
    return str(path)


def with_run_folder(cfg: Any, experiment: str | None = None, job: int | None = None) -> Any:
    """``cfg`` with ``out`` set: as given, or :func:`default_out` named after the experiment (else the
    algorithm)."""
    if cfg.out is not None:
        return cfg
    return dataclasses.replace(cfg, out=default_out(experiment or str(cfg.algo["name"]), job))


def run_dir(cfg: Any) -> Path:
    """``cfg.out`` as a path, once :func:`with_run_folder` has set it."""
    if cfg.out is None:
        raise ValueError("out is not set: with_run_folder(cfg) first")
    return Path(cfg.out)


# ---- resume only the same run -----------------------------------------------------------------------------
def _plain(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str))  # tuples -> lists, as the saved config reads back


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted keys of nested dicts (``algo.critic.steps``); lists are values."""
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _ignored(key: str) -> bool:
    parts = key.split(".")
    return any(".".join(parts[:i]) in NOT_THE_RESULT for i in range(1, len(parts) + 1))


def _show(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    return "null" if v is None else str(v)


_UNSET = "(not set)"


def config_differences(saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """``key: saved != now`` for every key that differs, except :data:`NOT_THE_RESULT` (dotted keys)."""
    a, b = _flat(_plain(saved)), _flat(_plain(now))
    return [
        f"{k}: {_show(a.get(k, _UNSET))} != {_show(b.get(k, _UNSET))}"
        for k in sorted(set(a) | set(b))
        if not _ignored(k) and a.get(k, _UNSET) != b.get(k, _UNSET)
    ]


def saved_config(last: Path) -> dict[str, Any]:
    """The resolved config ``checkpoints/last`` was trained with, after the checks of that folder.

    Raises:
        InputError: The checkpoint or its train state is damaged: one line, and that it cannot resume.
    """
    state = last / TRAIN_STATE_DIR / "state.json"
    try:
        check_checkpoint(last)
        read_safetensors_header(last / TRAIN_STATE_DIR / "tensors.safetensors")
        try:
            entries = json.loads(state.read_text())["__dict__"]
            config = next(v for k, v in entries if k == "config")["__dict__"]
        except (OSError, ValueError, KeyError, TypeError, StopIteration) as exc:
            raise InputError(f"{state}: unreadable ({exc!r})") from exc
    except InputError as exc:
        raise InputError(f"{exc}; cannot resume (resume=false to restart, or another out=)") from exc
    return _unflatten(config)


def _unflatten(entries: list[list[Any]]) -> dict[str, Any]:
    """A config dict from ``vla.checkpoint.flatten_state``'s encoding (no tensors in a config)."""

    def value(v: Any) -> Any:
        if isinstance(v, dict) and "__dict__" in v:
            return _unflatten(v["__dict__"])
        if isinstance(v, dict) and "__tuple__" in v:
            return [value(x) for x in v["__tuple__"]]
        return [value(x) for x in v] if isinstance(v, list) else v

    return {k: value(v) for k, v in entries}


def check_resume(cfg: Any, compared: Any = None) -> None:
    """Refuses to resume ``<out>/checkpoints/last`` with another config (``resume=false`` starts over).

    ``compared``: the config of the run that would resume there, when it is not ``cfg`` itself (a
    closed-loop run compares its first round's training run).

    Raises:
        InputError: One line: the folder, each differing key with both values, and the two ways on.
    """
    run = compared if compared is not None else cfg
    last = Path(run.out) / "checkpoints" / "last"
    if not cfg.resume or not last.exists():
        return
    diffs = config_differences(saved_config(last), dataclasses.asdict(run))
    if diffs:
        raise InputError(
            f"{cfg.out}: holds a run with another config ({'; '.join(diffs)}): pass another out=, "
            "or resume=false to start over in it"
        )


# ---- what the run prints ----------------------------------------------------------------------------------
class _Tee:
    """A text stream that also appends its complete lines to a log; of a line redrawn with ``\\r`` (a
    progress bar) only what it ended as is logged."""

    def __init__(self, stream: IO[str], log: IO[str], lock: threading.Lock) -> None:
        self.stream, self.log, self.lock, self.pending = stream, log, lock, ""

    def write(self, s: str) -> int:
        n = self.stream.write(s)
        with self.lock:
            *lines, rest = (self.pending + s).split("\n")
            self.pending = rest.rsplit("\r", 1)[-1]  # bounded: a bar's redraws replace each other
            for line in lines:
                line = line.rsplit("\r", 1)[-1]
                if line.strip():
                    self.log.write(line + "\n")
            if lines:
                self.log.flush()
        return n

    def finish(self) -> None:
        if self.pending.strip():
            self.log.write(self.pending + "\n")
        self.pending = ""

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding: the terminal's
        return getattr(self.stream, name)


@contextmanager
def run_log(out: str | Path) -> Iterator[Path]:
    """Appends what this process prints to ``<out>/train.log`` until the block ends (an error that ends
    it is logged too); the terminal sees the same as without it."""
    path = Path(out) / LOG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as log:
        log.write(f"--- {datetime.now():%Y-%m-%d %H:%M:%S}: {' '.join(sys.argv)}\n")
        lock = threading.Lock()
        saved = sys.stdout, sys.stderr
        tees = _Tee(saved[0], log, lock), _Tee(saved[1], log, lock)
        sys.stdout, sys.stderr = tees
        try:
            yield path
        except BaseException as exc:
            log.write(f"stopped: {type(exc).__name__}: {exc}\n")
            raise
        finally:
            sys.stdout, sys.stderr = saved
            for t in tees:
                t.finish()


# ---- scalars ----------------------------------------------------------------------------------------------
class LazyScalars:
    """``log({tag: value}, step)`` into a TensorBoard folder made at the first call (none if never called);
    a new folder's earlier events are purged (a refit replaces the last fit's curve)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.writer = folder, None  # type: Path, Any

    def __call__(self, scalars: dict[str, float], step: int) -> None:
        if self.writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.folder), purge_step=0)
        for k, v in scalars.items():
            self.writer.add_scalar(k, v, step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def check_wandb(cfg: Any) -> None:
    """Raises:
    InputError: ``wandb.enable=true`` without the ``wandb`` package."""
    if cfg.wandb.enable and importlib.util.find_spec("wandb") is None:
        raise InputError(
            "wandb.enable=true but wandb is not installed: pip install wandb (or wandb.enable=false)"
        )


def start_wandb(cfg: Any, out: Path) -> Any:
    """A W&B run mirroring every TensorBoard scalar of this run (``sync_tensorboard``); None when off.
    Call before any SummaryWriter is made."""
    if not cfg.wandb.enable:
        return None
    import wandb

    return wandb.init(
        project=cfg.wandb.project,
        mode=cfg.wandb.mode,
        name=str(out),
        dir=str(out),
        config=_plain(dataclasses.asdict(cfg)),
        sync_tensorboard=True,
    )
