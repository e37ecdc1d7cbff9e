"""``LogDirectory``: the log files one process serves, listed and read in bounded ranges.

Follows Flink's log list and file upload of a TaskManager (``TaskExecutorGateway.requestLogList``,
``requestFileUploadByName``; REST ``LogInfo``/``LogListInfo``), with two differences: files are
read in bounded chunks (``LogChunk``, at most ``MAX_LOG_CHUNK_BYTES``) instead of uploaded whole
to a blob server, and only files this process registered can be read (an allowlist of names, so
no path from a request ever reaches the file system).

Thread-safe: task threads register files while REST requests list and read them (from worker
threads).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from flintlock.runtime.logs.exceptions import LogFileNotFoundException

__all__ = [
    "DEFAULT_MAX_LOG_FILES",
    "MAX_LOG_CHUNK_BYTES",
    "LogChunk",
    "LogDirectory",
    "LogInfo",
    "check_log_file_name",
]

#: largest chunk one read returns (bytes); whole files are served as a sequence of chunks
MAX_LOG_CHUNK_BYTES = 1 << 20
#: how many registered files a directory keeps; the oldest (never the main log) are deleted
DEFAULT_MAX_LOG_FILES = 1000

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def check_log_file_name(name: str) -> str:
    """Return ``name`` if it is a plain log file name, else raise.

    A plain name is 1-200 characters of letters, digits, ``.``, ``_`` and ``-``, starting with a
    letter or digit: no separators, so it cannot leave its directory.

    Raises:
        LogFileNotFoundException: the name is malformed (the message says what is allowed).
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise LogFileNotFoundException(
            f"Invalid log file name {name!r}: expected 1-200 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit.")
    return name


@dataclass(frozen=True)
class LogInfo:
    """One log file (Flink ``LogInfo``): ``name``, ``size`` in bytes, ``mtime_ms`` epoch ms."""

    name: str
    size: int
    mtime_ms: int


@dataclass(frozen=True)
class LogChunk:
    """Bytes ``[start, start + len(data))`` of log file ``name``, whose size was ``size`` bytes."""

    name: str
    start: int
    data: bytes
    size: int

    @property
    def end(self) -> int:
        """Offset after the last byte returned (exclusive)."""
        return self.start + len(self.data)


class LogDirectory:
    """The log files of one process (or one TaskExecutor) in ``directory``.

    Args:
        directory: where the files are (created if missing).
        main_log: name of the process log file in ``directory``, if the process has one (served
            by ``/jobmanager/log`` and ``/taskmanagers/:id/log``).
        max_files: registered files kept; registering more deletes the oldest (not ``main_log``).
        owned: the directory is a temporary one of this process: ``close()`` removes it.
    """

    def __init__(self, directory: str | os.PathLike[str], *, main_log: str | None = None,
                 max_files: int = DEFAULT_MAX_LOG_FILES, owned: bool = False) -> None:
        self._dir = Path(directory)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._main_log = check_log_file_name(main_log) if main_log is not None else None
        self._max_files = max(1, max_files)
        self._owned = owned
        self._lock = threading.Lock()
        self._files: OrderedDict[str, None] = OrderedDict()

    @classmethod
    def temporary(cls, prefix: str, **kwargs: object) -> LogDirectory:
        """A new owned temporary directory (removed by ``close()``)."""
        return cls(tempfile.mkdtemp(prefix=prefix), owned=True, **kwargs)  # type: ignore[arg-type]

    @property
    def path(self) -> Path:
        return self._dir

    @property
    def main_log(self) -> str | None:
        return self._main_log

    def set_main_log(self, name: str) -> Path:
        """Declare the process log file (created by the caller's logging handler); returns its path."""
        self._main_log = check_log_file_name(name)
        return self._dir / name

    def register(self, name: str) -> Path:
        """Serve file ``name`` from now on; returns its path (the file is not created here).

        Registering beyond ``max_files`` deletes the oldest registered file.
        """
        check_log_file_name(name)
        evicted: list[str] = []
        with self._lock:
            self._files[name] = None
            self._files.move_to_end(name)
            while len(self._files) > self._max_files:
                old, _ = self._files.popitem(last=False)
                if old != self._main_log:
                    evicted.append(old)
        for old in evicted:
            (self._dir / old).unlink(missing_ok=True)
        return self._dir / name

    def _served(self) -> list[str]:
        with self._lock:
            names = list(self._files)
        if self._main_log is not None and self._main_log not in names:
            names.insert(0, self._main_log)
        return names

    def list_logs(self) -> tuple[LogInfo, ...]:
        """The files that exist, newest first (blocking: stats files)."""
        infos = []
        for name in self._served():
            try:
                st = (self._dir / name).stat()
            except OSError:
                continue
            infos.append(LogInfo(name, st.st_size, int(st.st_mtime * 1000)))
        infos.sort(key=lambda i: (i.mtime_ms, i.name), reverse=True)
        return tuple(infos)

    def read(self, name: str | None, start: int = 0, count: int = MAX_LOG_CHUNK_BYTES) -> LogChunk:
        """Read up to ``count`` bytes of ``name`` (``None``: the main log) from byte ``start``.

        A negative ``start`` counts from the end of the file; a start past the end returns no
        bytes. ``count`` is capped at ``MAX_LOG_CHUNK_BYTES``. Blocking (file I/O).

        Raises:
            LogFileNotFoundException: no main log, a malformed name, a name this directory does
                not serve, or a file that no longer exists.
        """
        if name is None:
            if self._main_log is None:
                raise LogFileNotFoundException("This process has no log file (set env.log.dir, "
                                               "or run it as a JobManager/TaskManager process).")
            name = self._main_log
        check_log_file_name(name)
        if name not in self._served():
            raise LogFileNotFoundException(f"No log file named {name!r} here.")
        count = max(0, min(int(count), MAX_LOG_CHUNK_BYTES))
        try:
            with open(self._dir / name, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                offset = max(0, size + start) if start < 0 else min(start, size)
                f.seek(offset)
                data = f.read(min(count, size - offset))
        except FileNotFoundError:
            raise LogFileNotFoundException(f"Log file {name!r} no longer exists.") from None
        return LogChunk(name, offset, data, size)

    def close(self) -> None:
        """Remove the directory if it is an owned temporary one."""
        if self._owned:
            shutil.rmtree(self._dir, ignore_errors=True)
