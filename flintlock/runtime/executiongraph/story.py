"""A bounded per-entity transition log (dask's ``story``), attached to illegal-transition errors."""

from __future__ import annotations

from collections import deque

__all__ = ["Story"]


class Story:
    """The last ``maxlen`` lines of what happened to one entity, oldest first."""

    __slots__ = ("_lines",)

    def __init__(self, maxlen: int = 64) -> None:
        self._lines: deque[str] = deque(maxlen=maxlen)

    def record(self, timestamp_ms: int, line: str) -> None:
        self._lines.append(f"{timestamp_ms} {line}")

    def lines(self) -> list[str]:
        return list(self._lines)

    def __str__(self) -> str:
        return "\n".join(self._lines)
