"""Threads of a TaskManager's embedded Spark server JVM in Flink's ``ThreadDumpInfo`` form.

A Flink TaskManager's thread dump (``/taskmanagers/:id/thread-dump``) lists its JVM's threads; a
flintlock TaskManager runs its tasks' Python threads and, with an embedded Spark Connect server,
a JVM that does their data work (Spark's executor task threads, the Connect service, the block
manager...). Both are in its dump: the Python threads (``flintlock.runtime.thread_dump``), then
the JVM's, read with Spark's own ``Utils.getThreadDump()`` (what Spark's UI shows on its
Executors / Thread Dump page; ~0.1 s for ~50 threads, four Py4J calls per thread).

Each JVM thread is printed as Flink's ``JvmUtils.stringifyThreadInfo`` prints one::

    "<name>" Id=<JVM thread id> <Thread.State> (Spark JVM)
    \\tat <frame>                     innermost first
    \\t-  waiting on <lock>           Spark's lock notes stay under their frame
    \\t...                            when deeper than max_depth
    <empty line>

``(Spark JVM)`` tells them apart from the process's Python threads, whose ids are interpreter
thread idents.
"""

from __future__ import annotations

import logging
from typing import Any

from flintlock.runtime.thread_dump import ThreadInfo

__all__ = ["embedded_jvm_thread_dump", "stringify_jvm_thread"]

log = logging.getLogger(__name__)


def stringify_jvm_thread(name: str, thread_id: int, state: str, stack: str, max_depth: int) -> str:
    """One JVM thread as Flink prints it (module docstring); ``stack``: Spark's
    ``StackTrace.toString`` (frames one per line, lock notes on lines starting with a tab)."""
    lines = [f'"{name}" Id={thread_id} {state} (Spark JVM)\n']
    frames = 0
    for line in stack.splitlines():
        if not line.strip():
            continue
        if line.startswith("\t"):
            if 0 < frames <= max_depth:  # a note under a frame that is shown
                lines.append(f"{line}\n")
            continue
        frames += 1
        if frames <= max_depth:
            lines.append(f"\tat {line}\n")
    if frames > max_depth:
        lines.append("\t...\n")
    lines.append("\n")
    return "".join(lines)


def _dump(sc: Any, max_depth: int) -> tuple[ThreadInfo, ...]:
    infos = []
    for trace in sc._jvm.org.apache.spark.util.Utils.getThreadDump():
        name = str(trace.threadName())
        infos.append(ThreadInfo(name, stringify_jvm_thread(
            name, int(trace.threadId()), str(trace.threadState()),
            str(trace.stackTrace().toString()), max_depth)))
    return tuple(infos)


def embedded_jvm_thread_dump(max_depth: int) -> tuple[ThreadInfo, ...]:
    """The threads of this process's embedded Spark server JVM, in Spark's order (blocking: Py4J
    calls); empty without an embedded server (``spark.remote``, or no Spark) or when Py4J fails
    (logged at debug)."""
    from flintlock.runtime.spark.session import embedded_spark_context

    sc = embedded_spark_context()
    if sc is None:
        return ()
    try:
        return _dump(sc, max_depth)
    except Exception:
        log.debug("reading the embedded Spark server's threads failed", exc_info=True)
        return ()
