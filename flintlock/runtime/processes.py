"""Whether a process of this host is alive (pid files, the FILE HA registry, the tests)."""

from __future__ import annotations

import os

__all__ = ["pid_alive"]


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs: it exists and is not a zombie (a killed process whose
    parent has not reaped it yet still answers ``kill(pid, 0)``; Linux's ``/proc/<pid>/stat``
    tells). Another user's process counts as alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):  # no /proc (not Linux), or it ended meanwhile
        return True
