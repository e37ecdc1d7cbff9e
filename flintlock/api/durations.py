"""Durations as PyFlink takes them: ``datetime.timedelta`` or an int of milliseconds."""

from __future__ import annotations

import datetime

__all__ = ["Duration", "to_millis"]

Duration = datetime.timedelta | int


def to_millis(name: str, value: Duration, minimum_ms: int = 0) -> int:
    """``value`` (timedelta or int milliseconds) in whole milliseconds, at least ``minimum_ms``.

    Raises:
        TypeError: neither a timedelta nor an int (``name`` says which argument).
        ValueError: below ``minimum_ms``.
    """
    if isinstance(value, datetime.timedelta):
        ms = round(value.total_seconds() * 1000)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        raise TypeError(f"{name} must be a datetime.timedelta or an int of milliseconds, "
                        f"got {type(value).__name__} {value!r}")
    if ms < minimum_ms:
        raise ValueError(f"{name} must be at least {minimum_ms} ms, got {ms} ms")
    return ms
