"""Per-attempt task logs of a TaskManager (a flintlock addition: Flink has one log per TaskManager).

Each execution attempt gets its own file in the TaskManager's ``LogDirectory``, named after the
job, vertex, subtask and attempt, so clients can derive it from what REST already shows::

    task-<jobid>-<vertexid>-<subtaskindex>-<attemptnumber>.log

It holds a header (task, attempt id, job, TaskManager), the attempt's state changes, the Python
logging records and stdout/stderr written by its task thread (``capture``), and on failure the full
error text (Python traceback and Spark error). A file is at most ``MAX_TASK_LOG_BYTES``; the rest of
the output is dropped with one marker line.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import IO

from flintlock.runtime.ids import ExecutionAttemptID, JobID, JobVertexID
from flintlock.runtime.logs.files import LogDirectory

__all__ = [
    "MAX_TASK_LOG_BYTES",
    "TaskLogWriter",
    "open_task_log",
    "task_log_file_name",
    "task_log_file_name_of",
]

#: largest task log file (bytes)
MAX_TASK_LOG_BYTES = 16 << 20


def task_log_file_name(job_id: JobID | str, vertex_id: JobVertexID | str, subtask_index: int,
                       attempt_number: int) -> str:
    """``task-<jobid>-<vertexid>-<subtaskindex>-<attemptnumber>.log``."""
    return f"task-{job_id}-{vertex_id}-{int(subtask_index)}-{int(attempt_number)}.log"


def task_log_file_name_of(job_id: JobID | str, attempt_id: ExecutionAttemptID) -> str:
    """The task log file name of one attempt."""
    return task_log_file_name(job_id, attempt_id.job_vertex_id, attempt_id.subtask_index,
                              attempt_id.attempt_number)


class TaskLogWriter:
    """Appends text to one task log file; thread-safe, flushed on every write, size-bounded."""

    def __init__(self, path: Path, max_bytes: int = MAX_TASK_LOG_BYTES) -> None:
        self.path = path
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = open(path, "ab")
        self._written = self._file.tell()
        self._truncated = False

    def write(self, text: str) -> None:
        """Append ``text`` (UTF-8); past ``max_bytes`` write one marker line, then drop output."""
        if not text:
            return
        data = text.encode("utf-8", errors="replace")
        with self._lock:
            f = self._file
            if f is None or self._truncated:
                return
            if self._written + len(data) > self._max_bytes:
                self._truncated = True
                data = f"\n[task log truncated at {self._max_bytes} bytes]\n".encode()
            f.write(data)
            f.flush()
            self._written += len(data)

    def line(self, text: str) -> None:
        """Write one timestamped line."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        self.write(f"{stamp} {text}\n")

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def open_task_log(logs: LogDirectory, job_id: JobID, job_name: str, attempt_id: ExecutionAttemptID,
                  task_name: str, task_manager: str) -> TaskLogWriter:
    """Create (or append to) the attempt's task log in ``logs`` and write its header.

    Raises:
        OSError: the file cannot be created.
    """
    name = task_log_file_name_of(job_id, attempt_id)
    writer = TaskLogWriter(logs.register(name))
    writer.line(f"Task {task_name} (attempt {attempt_id}) of job {job_name!r} ({job_id}) on "
                f"TaskManager {task_manager}; log file {name}")
    return writer
