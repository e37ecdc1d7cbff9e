"""Errors of the log file service (they cross the RPC wire as their own class)."""

from __future__ import annotations

from flintlock.exceptions import FlintlockException

__all__ = ["LogFileNotFoundException"]


class LogFileNotFoundException(FlintlockException):
    """The requested log file is not one this process serves (unknown, malformed or deleted)."""
