"""Process log files of the JobManager and TaskManager entry points (Flink's ``log/flink-*.log``).

``env.log.dir`` names the directory; unset, each process uses a temporary directory that is
removed when it stops. The file gets every record at INFO and above, whatever the console level
(console handlers keep the level they had). Names:

- JobManager: ``flintlock-jobmanager-<host>-<pid>.log``
- TaskManager: ``flintlock-taskmanager-<resource id>.log`` (characters other than letters, digits,
  ``.``, ``_`` and ``-`` become ``_``); its task logs live in the same directory.
"""

from __future__ import annotations

import logging
import re

from flintlock.config import Configuration
from flintlock.config.options import LOG_DIR
from flintlock.runtime.logs.files import LogDirectory

__all__ = [
    "file_name_part",
    "log_directory_for",
    "start_process_log",
    "stop_process_log",
]

_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(threadName)s]: %(message)s"


def file_name_part(text: str) -> str:
    """``text`` made safe for a log file name."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text).lstrip("._-") or "x"


def log_directory_for(configuration: Configuration, temporary_prefix: str) -> LogDirectory:
    """The process's ``LogDirectory``: ``env.log.dir``, or an owned temporary directory."""
    configured = configuration.get(LOG_DIR)
    if configured:
        return LogDirectory(configured)
    return LogDirectory.temporary(temporary_prefix)


def start_process_log(logs: LogDirectory, file_name: str) -> logging.Handler:
    """Log every record at INFO and above to ``file_name`` in ``logs`` (its main log).

    The root logger is lowered to INFO if needed; handlers already on it keep showing what they
    showed before. Returns the handler for ``stop_process_log``.
    """
    path = logs.set_main_log(file_name_part(file_name))
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.setLevel(logging.INFO)
    root = logging.getLogger()
    if root.getEffectiveLevel() > logging.INFO:
        for existing in root.handlers:
            if existing.level == logging.NOTSET:
                existing.setLevel(root.level)
        root.setLevel(logging.INFO)
    root.addHandler(handler)
    return handler


def stop_process_log(handler: logging.Handler) -> None:
    """Detach and close the handler of ``start_process_log``."""
    logging.getLogger().removeHandler(handler)
    handler.close()
