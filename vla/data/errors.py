"""Errors raised by the episode-data layer."""

from __future__ import annotations

from vla.errors import InputError


class DatasetError(InputError):
    """A dataset on disk is invalid; the message names the file, the episode and the field."""
