"""Processes of this host: whether one is alive (pid files, the FILE HA registry, the tests), and
ending with the parent (TaskManagers an active ResourceManager started)."""

from __future__ import annotations

import os

__all__ = ["PARENT_PID_ENV", "descendants", "exit_with_parent", "pid_alive",
           "process_group_alive"]

#: set by a process that starts TaskManagers which must end with it (``exit_with_parent``)
PARENT_PID_ENV = "FLINTLOCK_PARENT_PID"


def _proc_stat(pid: int) -> tuple[bytes, int, int] | None:
    """``(state, ppid, pgrp)`` from Linux's ``/proc/<pid>/stat`` (state ``b"Z"``: a zombie);
    None without ``/proc`` (not Linux) or when the process ended meanwhile."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state, ppid, pgrp = stat.read().rsplit(b")", 1)[1].split()[:3]
        return state, int(ppid), int(pgrp)
    except (OSError, ValueError):
        return None


def _all_pids() -> list[int] | None:
    """The pids in Linux's ``/proc``; None without it."""
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None


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
    stat = _proc_stat(pid)
    return stat is None or stat[0] != b"Z"


def process_group_alive(pgid: int) -> bool:
    """Whether any process of process group ``pgid`` runs (zombies do not count, as in
    ``pid_alive``): ``killpg(pgid, 0)``, then Linux's ``/proc/<pid>/stat`` (its ``pgrp`` field)
    for a member that is not a zombie. Without ``/proc``, any member counts."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    pids = _all_pids()
    if pids is None:
        return True
    return any((stat := _proc_stat(pid)) is not None and stat[2] == pgid and stat[0] != b"Z"
               for pid in pids)


def descendants(root: int) -> list[int]:
    """The pids of ``root``'s children, their children and so on (not ``root``), from Linux's
    ``/proc/<pid>/stat`` (its ``ppid`` field); [] without ``/proc``. A snapshot: processes
    started or ended meanwhile may be missed or listed."""
    children: dict[int, list[int]] = {}
    for pid in _all_pids() or ():
        if (stat := _proc_stat(pid)) is not None:
            children.setdefault(stat[1], []).append(pid)
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def exit_with_parent(expected_parent: int) -> None:
    """Have this process receive SIGTERM when its parent ends (Linux ``PR_SET_PDEATHSIG``), so a
    TaskManager started by a JobManager that is killed does not outlive it; if the parent is
    already gone (it is no longer ``expected_parent``), SIGTERM this process now. No-op where
    ``prctl`` does not exist."""
    import ctypes
    import ctypes.util
    import signal

    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return
    try:
        prctl = ctypes.CDLL(libc_name, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    pr_set_pdeathsig = 1
    prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != expected_parent:  # it ended before the signal was armed
        os.kill(os.getpid(), signal.SIGTERM)
