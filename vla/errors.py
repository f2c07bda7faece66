"""Errors the command-line tools turn into one line on stderr, and the helper that does it.

``InputError``: a dataset, checkpoint or file given to a tool is refused before any work (exit status 2).
``NonFiniteError``: training met a non-finite loss or gradient and stopped without saving (exit status 1).
Both carry a one-line message that names the file (and the episode, field or step) and what to do.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

INPUT_ERROR_STATUS = 2
NON_FINITE_STATUS = 1


class InputError(ValueError):
    """An input is refused: the message is one line naming the file, the episode or field, and the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))  # one line, whatever the wrapped error printed


class NonFiniteError(FloatingPointError):
    """A loss or gradient norm is NaN/inf: the update is skipped and training stops, nothing is saved."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


@contextmanager
def exit_on_refusal() -> Iterator[None]:
    """For a CLI's body: an :class:`InputError` or :class:`NonFiniteError` becomes ``error: <message>`` on
    stderr (one line, no traceback) and ``SystemExit`` with status 2 or 1. Hydra lets ``SystemExit``
    through untouched (it reports only ``Exception``)."""
    try:
        yield
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(INPUT_ERROR_STATUS) from None
    except NonFiniteError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(NON_FINITE_STATUS) from None
