"""Log files of flintlock processes: process logs, per-attempt task logs, and serving them.

- ``files``: ``LogDirectory`` (the files one process serves; listing and bounded ranged reads),
  ``LogInfo``/``LogChunk`` (what travels over RPC and REST).
- ``task_logs``: the per-attempt task log of a TaskManager (``task-<job>-<vertex>-<subtask>-<attempt>.log``).
- ``capture``: routes a task thread's Python logging and stdout/stderr into its task log.
- ``process_logs``: the process log file of the JobManager and TaskManager entry points.
"""

from __future__ import annotations

from flintlock.runtime.logs.exceptions import LogFileNotFoundException
from flintlock.runtime.logs.files import MAX_LOG_CHUNK_BYTES, LogChunk, LogDirectory, LogInfo
from flintlock.runtime.logs.task_logs import task_log_file_name, task_log_file_name_of

__all__ = [
    "MAX_LOG_CHUNK_BYTES",
    "LogChunk",
    "LogDirectory",
    "LogFileNotFoundException",
    "LogInfo",
    "task_log_file_name",
    "task_log_file_name_of",
]
