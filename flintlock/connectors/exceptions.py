"""Connector errors: a source or sink that cannot read or write its target."""

from __future__ import annotations

from flintlock.exceptions import FlintlockException

__all__ = ["SinkException", "SourceException"]


class SourceException(FlintlockException):
    """The input of a source is missing or unreadable; restarting cannot fix it."""

    non_recoverable = True


class SinkException(FlintlockException):
    """The target of a sink cannot be written (e.g. it already holds data); non-recoverable."""

    non_recoverable = True
