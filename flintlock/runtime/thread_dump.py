"""Thread dumps of this Python process in Flink's ``ThreadDumpInfo`` form.

``thread_dump(max_depth)`` describes every thread that runs Python code: the threads of
``threading.enumerate()`` with their current frames from ``sys._current_frames()``, and frames of
threads the ``threading`` module does not know. Each becomes a ``ThreadInfo(thread_name,
stringified)`` whose text follows Flink's ``JvmUtils.stringifyThreadInfo`` (what the dashboard
shows and searches for ``"<thread name>``)::

    "<name>" Id=<thread ident> <STATE>
    \\tat <module>.<qualified function>(<file>:<line>)     innermost frame first, as in Java
    \\t...                                                  when deeper than max_depth
    <empty line>

Python threads have no Java thread state. STATE is WAITING when the innermost Python frame is a
blocking wait of the standard library (``threading`` condition waits and joins, ``queue.get``,
``selectors`` selects, an idle ``concurrent.futures`` worker), TIMED_WAITING when that wait has a
timeout, RUNNABLE otherwise: a thread blocked in C code called from its own frame (``time.sleep``,
a socket read) shows as RUNNABLE, as a Java thread in native code does.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from types import FrameType
from typing import Any

__all__ = ["DEFAULT_MAX_DEPTH", "ThreadInfo", "stringify_thread", "thread_dump"]

#: Flink's ``cluster.thread-dump.stacktrace-max-depth`` default.
DEFAULT_MAX_DEPTH = 50

#: (module, function) of standard-library frames that block until woken up
_WAITS = frozenset({
    ("threading", "wait"), ("threading", "_wait_for_tstate_lock"), ("threading", "join"),
    ("queue", "get"), ("selectors", "select"), ("concurrent.futures.thread", "_worker"),
    ("multiprocessing.connection", "wait"), ("subprocess", "_try_wait"),
})


@dataclass(frozen=True)
class ThreadInfo:
    """One thread of a dump (Flink ``ThreadDumpInfo.ThreadInfo``).

    Attributes:
        thread_name: the thread's name (``threadName``).
        stringified: its header line and stack (``stringifiedThreadInfo``).
    """

    thread_name: str
    stringified: str


def _state(frame: FrameType) -> str:
    module = frame.f_globals.get("__name__", "")
    if (module, frame.f_code.co_name) not in _WAITS:
        return "RUNNABLE"
    try:
        timeout: Any = frame.f_locals.get("timeout")
    except Exception:  # pragma: no cover - a frame that cannot show its locals
        timeout = None
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout >= 0:
        return "TIMED_WAITING"
    return "WAITING"


def _frame_line(frame: FrameType) -> str:
    code = frame.f_code
    module = frame.f_globals.get("__name__", "?")
    function = getattr(code, "co_qualname", code.co_name)
    return f"\tat {module}.{function}({os.path.basename(code.co_filename)}:{frame.f_lineno})\n"


def stringify_thread(name: str, ident: int, frame: FrameType | None, max_depth: int) -> str:
    """One thread as Flink's ``JvmUtils.stringifyThreadInfo`` prints it (see the module doc)."""
    stack: list[FrameType] = []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    state = _state(stack[0]) if stack else "RUNNABLE"
    lines = [f'"{name}" Id={ident} {state}\n']
    lines += [_frame_line(f) for f in stack[:max(0, max_depth)]]
    if len(stack) > max_depth:
        lines.append("\t...\n")
    lines.append("\n")
    return "".join(lines)


def thread_dump(max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[ThreadInfo, ...]:
    """The threads of this process that run Python code, with up to ``max_depth`` frames each
    (the main thread first, then in ``threading.enumerate()`` order; threads the ``threading``
    module does not know are named ``Thread-<ident>``)."""
    frames = sys._current_frames()
    known = threading.enumerate()
    known.sort(key=lambda t: t is not threading.main_thread())
    infos: list[ThreadInfo] = []
    seen: set[int] = set()
    for thread in known:
        ident = thread.ident
        if ident is None:
            continue
        seen.add(ident)
        infos.append(ThreadInfo(thread.name,
                                stringify_thread(thread.name, ident, frames.get(ident), max_depth)))
    for ident, frame in frames.items():
        if ident not in seen:
            name = f"Thread-{ident}"
            infos.append(ThreadInfo(name, stringify_thread(name, ident, frame, max_depth)))
    return tuple(infos)
