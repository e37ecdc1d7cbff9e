"""Route what a task thread logs and prints into its task log (``capture_thread_output``).

``logging`` and ``sys.stdout``/``sys.stderr`` are process-wide, so the routing is too: while at
least one task thread captures, a ``logging.Handler`` sits on the root logger and the standard
streams are wrapped by a proxy. Both look up the *current thread* in a table of writers: a task
thread's records and prints go to its own ``TaskLogWriter`` (and still to the original streams and
handlers); other threads are not affected. When the last capture ends, the handler is removed and
the streams are restored (unless something else replaced them meanwhile).

Python UDFs run in Spark's Python worker processes, not in the task thread: their output is in
Spark's logs, not here. Records below a logger's level are never emitted, so a task log shows
INFO records only when logging is configured at INFO (``flintlock -v``, the cluster processes).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from flintlock.runtime.logs.task_logs import TaskLogWriter

__all__ = ["capture_thread_output"]

_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(threadName)s]: %(message)s"


class _ThreadRouter:
    """Thread id -> writer table with the handler and stream proxies that consult it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._writers: dict[int, TaskLogWriter] = {}
        self._handler = _RoutingHandler(self)
        self._proxies: dict[str, _RoutedStream] = {}

    def writer(self) -> TaskLogWriter | None:
        return self._writers.get(threading.get_ident())

    def add(self, writer: TaskLogWriter) -> int:
        ident = threading.get_ident()
        with self._lock:
            if not self._writers:
                self._install()
            self._writers[ident] = writer
        return ident

    def remove(self, ident: int) -> None:
        with self._lock:
            self._writers.pop(ident, None)
            if not self._writers:
                self._uninstall()

    def _install(self) -> None:
        logging.getLogger().addHandler(self._handler)
        for name in ("stdout", "stderr"):
            current = getattr(sys, name)
            if not isinstance(current, _RoutedStream):
                proxy = _RoutedStream(self, current)
                self._proxies[name] = proxy
                setattr(sys, name, proxy)

    def _uninstall(self) -> None:
        logging.getLogger().removeHandler(self._handler)
        for name, proxy in list(self._proxies.items()):
            if getattr(sys, name) is proxy:  # leave streams someone else replaced meanwhile
                setattr(sys, name, proxy.wrapped)
            del self._proxies[name]


class _RoutingHandler(logging.Handler):
    def __init__(self, router: _ThreadRouter) -> None:
        super().__init__()
        self._router = router
        self.setFormatter(logging.Formatter(_FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        writer = self._router.writer()
        if writer is None:
            return
        try:
            writer.write(self.format(record) + "\n")
        except Exception:  # a task log must never break the task
            self.handleError(record)


class _RoutedStream:
    """A text stream proxy: writes go to the current task's log (if any) and to ``wrapped``."""

    def __init__(self, router: _ThreadRouter, wrapped: TextIO) -> None:
        self._router = router
        self.wrapped = wrapped

    def write(self, text: str) -> int:
        writer = self._router.writer()
        if writer is not None:
            writer.write(text)
        return self.wrapped.write(text)

    def flush(self) -> None:
        self.wrapped.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


#: the process's router (logging and the standard streams are process-wide)
_ROUTER = _ThreadRouter()


@contextmanager
def capture_thread_output(writer: TaskLogWriter) -> Iterator[TaskLogWriter]:
    """While the block runs, this thread's log records and stdout/stderr also go to ``writer``."""
    ident = _ROUTER.add(writer)
    try:
        yield writer
    finally:
        _ROUTER.remove(ident)
