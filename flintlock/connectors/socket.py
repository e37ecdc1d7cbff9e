"""``socket_text_stream(host, port)``: lines of text read from a TCP socket (Flink's
``SocketTextStreamFunction``; for tests and demos: nothing can be replayed after a failure).

``SocketTextSource`` is unbounded and runs in one source subtask. The subtask connects when it
starts and reads whatever arrived each epoch; records end at ``delimiter`` (``"\\n"``; a trailing
``"\\r"`` is dropped). When the peer closes the connection, the text after the last delimiter
is the last record and the subtask reconnects up to ``max_retry`` times, 500 ms apart (``0``: the
source ends; ``-1``: forever), as Flink's does. Rows: ``value string``.

Errors: a connection that is refused (and not retried) fails the task with a
``SourceException`` naming ``host:port``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["SocketLines", "SocketSplit", "SocketTextSource"]

#: Flink's ``SocketTextStreamFunction.DEFAULT_CONNECTION_RETRY_SLEEP``
RETRY_SLEEP_S = 0.5


@dataclass(frozen=True)
class SocketSplit:
    """The one split of a socket source (subtask 0 connects)."""

    host: str
    port: int


@dataclass(frozen=True)
class SocketLines:
    """What one epoch read: complete records, in order."""

    lines: tuple[str, ...]


class SocketTextSource:
    """Lines from ``host:port`` (see the module docstring)."""

    bounded = False

    def __init__(self, host: str, port: int, delimiter: str = "\n", max_retry: int = 0) -> None:
        if not isinstance(host, str) or not host:
            raise ValueError(f"socket_text_stream: host must be a non-empty string, got {host!r}")
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"socket_text_stream: port must be 1-65535, got {port!r}")
        if not isinstance(delimiter, str) or not delimiter:
            raise ValueError("socket_text_stream: the delimiter must be a non-empty string")
        if not isinstance(max_retry, int) or max_retry < -1:
            raise ValueError(f"socket_text_stream: max_retry must be >= -1, got {max_retry!r}")
        self.host, self.port, self.delimiter, self.max_retry = host, port, delimiter, max_retry

    def describe(self) -> str:
        return f"Socket Stream: {self.host}:{self.port}"

    def output_schema(self) -> str | None:
        return "value string"

    def enumerate_splits(self, parallelism: int) -> list[list[Any]]:
        return [[SocketSplit(self.host, self.port)]] + [[] for _ in range(parallelism - 1)]

    def __repr__(self) -> str:
        return f"SocketTextSource({self.host!r}, {self.port})"
