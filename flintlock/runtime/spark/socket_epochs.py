"""The epochs of a ``SocketTextSource`` subtask: a non-blocking TCP client (I/O shell).

``SocketEpochs.next_epoch`` reads what arrived (never blocking), splits complete records at the
delimiter and returns them as one ``SocketLines`` split; with nothing new it asks to be called
again after ``min_interval_s``. Reconnects and the end of the source follow
``SocketTextSource.max_retry`` (see ``flintlock.connectors.socket``).

Raises ``SourceException`` naming ``host:port`` when the connection is refused and no retry is
left.
"""

from __future__ import annotations

import socket

from flintlock.connectors.exceptions import SourceException
from flintlock.connectors.socket import RETRY_SLEEP_S, SocketLines, SocketTextSource
from flintlock.runtime.spark.epoch_sources import Epoch, EpochSource

__all__ = ["SocketEpochs"]

_CHUNK = 1 << 16


class SocketEpochs(EpochSource):
    def __init__(self, source: SocketTextSource, min_interval_s: float = 0.1) -> None:
        self.source = source
        self.min_interval_s = max(0.001, min_interval_s)
        self._socket: socket.socket | None = None
        self._buffer = ""
        self._retries = 0
        self._next_attempt_s = float("-inf")
        self._ended = False

    def _connect(self, now_s: float) -> bool:
        if now_s < self._next_attempt_s:
            return False
        src = self.source
        try:
            sock = socket.create_connection((src.host, src.port), timeout=5)
        except OSError as exc:
            if not self._retry(now_s):
                raise SourceException(
                    f"socket_text_stream: cannot connect to {src.host}:{src.port}: {exc} (is "
                    "the server running? e.g. nc -lk <port>)") from exc
            return False
        sock.setblocking(False)
        self._socket = sock
        return True

    def _retry(self, now_s: float) -> bool:
        if self.source.max_retry != -1 and self._retries >= self.source.max_retry:
            return False
        self._retries += 1
        self._next_attempt_s = now_s + RETRY_SLEEP_S
        return True

    def next_epoch(self, now_s: float, busy_s: float = 0.0) -> Epoch:
        if self._ended:
            return Epoch(ended=True)
        if self._socket is None and not self._connect(now_s):
            return Epoch(wait_s=max(0.001, self._next_attempt_s - now_s))
        assert self._socket is not None
        closed = False
        chunks: list[bytes] = []
        while True:
            try:
                data = self._socket.recv(_CHUNK)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                closed = True
                break
            if not data:
                closed = True
                break
            chunks.append(data)
        self._buffer += b"".join(chunks).decode("utf-8", errors="replace")
        *complete, self._buffer = self._buffer.split(self.source.delimiter)
        if closed:
            self.close()
            if self._buffer:
                complete.append(self._buffer)
                self._buffer = ""
            if not self._retry(now_s):
                self._ended = True
        lines = tuple(line[:-1] if line.endswith("\r") else line for line in complete)
        if not lines:
            return Epoch(ended=self._ended, wait_s=self.min_interval_s)
        return Epoch((SocketLines(lines),), ended=self._ended)

    def close(self) -> None:
        sock, self._socket = self._socket, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SocketEpochs({self.source!r})"

