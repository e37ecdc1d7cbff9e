"""Errors of the DataStream API and the client-side compiler."""

from __future__ import annotations

from flintlock.exceptions import FlintlockException

__all__ = ["InvalidProgramException"]


class InvalidProgramException(FlintlockException):
    """The program cannot be compiled or run as written (Flink ``InvalidProgramException``).

    Raised for, e.g., an unserializable user function, forward partitioning across different
    parallelisms, a duplicate uid, STREAMING runtime mode, or a job without sinks.
    """
