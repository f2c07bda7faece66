"""One writer per folder: an advisory lock held while a process writes a dataset or a training run.

Two processes appending episodes to one dataset, or training into one output folder, interleave their
files and leave both results wrong without an error. :func:`folder_lock` takes an exclusive ``flock`` on
``<parent>/.<name>.lock`` (beside the folder: a dataset folder must not exist before lerobot creates it)
and refuses at once, naming the folder and the process that holds it. The kernel drops the lock when its
holder exits, however it exits, so a killed run never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from vla.errors import InputError


class FolderBusyError(InputError):
    """Another live process holds the folder's lock (a refusal before any work: CLIs exit with status 2)."""


def lock_path(folder: str | Path) -> Path:
    folder = Path(folder).absolute()
    return folder.parent / f".{folder.name}.lock"


def acquire(folder: str | Path, what: str) -> IO[str]:
    """Locks ``folder`` for this process; returns the open lock file (``release`` it, or let it close).

    Raises:
        FolderBusyError: Another process holds the lock; the message names the folder, that process's pid
            and what it is doing.
    """
    path = lock_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a+")  # noqa: SIM115  (held for the lock's lifetime; closed by ``release``)
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise FolderBusyError(
            f"{Path(folder)} is in use by {holder}; wait for it to finish or choose another folder"
        ) from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} ({what})")
    f.flush()
    return f


def release(handle: IO[str]) -> None:
    """Drops a lock taken by :func:`acquire` (idempotent)."""
    if not handle.closed:
        handle.close()  # closing the descriptor drops the flock


@contextmanager
def folder_lock(folder: str | Path, what: str) -> Iterator[None]:
    """``with folder_lock(out, "training"):`` -- :func:`acquire` for the body of the block."""
    handle = acquire(folder, what)
    try:
        yield
    finally:
        release(handle)
