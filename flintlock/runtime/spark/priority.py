"""The embedded Spark server runs below the control plane's CPU priority (``taskmanager.spark.nice``).

Every flintlock process answers heartbeats and RPC on one asyncio loop. On a host whose cores are
busy with Spark work, that loop waits for a CPU at every wake-up; measured on 2 cores under the
load test (Q18 at SF 1 and 50 small jobs, ``tests/process/test_load.py``), the JobManager's loop
thread spent 2 of every 5 s waiting in the run queue, and its loop lag p99 reached 200-260 ms.
A lower priority for the Spark JVM and its Python workers lets every control-plane thread on the
host run first (p99 40-75 ms in the same test).

Two Linux mechanisms decide whether a nice value counts:

- A nice value belongs to a thread and is inherited by the threads and processes it starts. The
  server is launched from a thread of its own that raised its nice value (``call_niced``), so the
  JVM and every Python worker it forks run niced while the launching process keeps its priority.
- With autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``, on by default on many
  distributions) the CPU is first shared between sessions, and nice values only order threads
  within a session. The JVM is therefore started in a session of its own (``start_new_session``)
  whose autogroup gets the same nice value (``/proc/<pid>/autogroup``). It still ends with the
  process that started it: PySpark's gateway server exits when its stdin pipe closes.

Raising a nice value needs no privilege. Elsewhere than Linux, or when either step fails, the
server runs at the process's priority and a warning says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["call_niced", "new_session_gateway"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def _linux() -> bool:
    return sys.platform.startswith("linux")


def call_niced(nice: int, fn: Callable[[], T]) -> T:
    """Run ``fn()`` in a thread of its own whose nice value is ``nice`` higher and return its
    result (its exception is re-raised here). ``nice`` 0, or a platform other than Linux: ``fn``
    runs in that thread at this process's priority."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        if nice and _linux():
            try:
                tid = threading.get_native_id()
                os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
            except OSError as exc:
                log.warning("could not lower the embedded Spark server's priority: %s", exc)
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    launcher = threading.Thread(target=run, name="spark-server-launcher", daemon=True)
    launcher.start()
    launcher.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


def _renice_autogroup(pid: int, nice: int) -> None:
    path = f"/proc/{pid}/autogroup"
    if not os.path.exists(path):  # a kernel without autogroup scheduling
        return
    try:
        with open(path, "w") as fh:
            fh.write(str(nice))
    except OSError as exc:
        log.warning("could not lower the priority of the embedded Spark server's session "
                    "(%s): %s", path, exc)


@contextlib.contextmanager
def new_session_gateway(nice: int) -> Iterator[None]:
    """While active, PySpark starts its JVM gateway (``pyspark.core.context.launch_gateway``) in a
    new session whose autogroup nice value is ``nice``. A no-op for ``nice`` 0 or off Linux.
    Not thread-safe: hold the lock that serializes the server's start."""
    if not nice or not _linux():
        yield
        return
    from pyspark.core import context as spark_context

    original = spark_context.launch_gateway

    def launch(conf: Any = None, popen_kwargs: dict[str, Any] | None = None) -> Any:
        gateway = original(conf, {**(popen_kwargs or {}), "start_new_session": True})
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            _renice_autogroup(proc.pid, nice)
        return gateway

    spark_context.launch_gateway = launch
    try:
        yield
    finally:
        spark_context.launch_gateway = original
