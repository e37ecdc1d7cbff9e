"""An embedded Spark server held to a share of the wall clock: a TaskManager on a slow node.

An injected fault for tests and benchmarks (``$internal.fault.task-slowdown`` with
``$internal.fault.task-slowdown.mode: throttle``). The TaskManager's embedded Spark server (its
JVM and every process under it: PySpark's daemon and Python workers) is stopped with SIGSTOP
for ``(1 - 1/factor)`` of every period and continued with SIGCONT for the rest, as ``cpulimit``
does. Its Spark work then proceeds at about ``1/factor`` of its speed and uses that share of the
CPU, as on a node whose CPUs are ``factor`` times slower: a slow node does not take CPU time
from the fast ones, and the progress of its tasks shows that it is slow. The TaskManager's own
process (RPC, heartbeats, task threads) keeps running; calls into the server wait.

The other mode, ``wait`` (``taskmanager/task.py``), lets the task's work run at full speed and
then holds its result back ``(factor - 1) x`` its run time.

Not a Flink concept; Flink's tests make TaskManagers slow with test invokables.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass

from flintlock.runtime.processes import descendants, pid_alive

__all__ = ["DutyCycle", "ProcessTreeThrottle"]

log = logging.getLogger(__name__)

#: the length of one stop-and-continue cycle (seconds): short enough that a Spark task of
#: ~100 ms is slowed evenly, long enough that signalling costs little
PERIOD_S = 0.1
#: how often the processes under the root are listed again (seconds): Python workers come and go
REFRESH_S = 1.0


@dataclass(frozen=True)
class DutyCycle:
    """How long the processes run and stay stopped in each period (seconds)."""

    run_s: float
    stop_s: float

    @classmethod
    def for_slowdown(cls, factor: float, period_s: float = PERIOD_S) -> DutyCycle:
        """The cycle that makes work take ``factor`` times as long: running ``period_s /
        factor`` of every ``period_s``.

        Raises:
            ValueError: ``factor`` below 1 or ``period_s`` not positive.
        """
        if not factor >= 1.0:
            raise ValueError(f"a slowdown factor is at least 1, not {factor}")
        if not period_s > 0:
            raise ValueError(f"the period must be positive, not {period_s}")
        run = period_s / factor
        return cls(run, period_s - run)


class ProcessTreeThrottle:
    """Stops and continues process ``root`` and its descendants by ``cycle`` in a daemon
    thread, from ``start()`` until ``stop()``, which leaves every process it stopped running
    again.

    Args:
        root: the pid of the tree's root (the embedded Spark server's JVM).
        cycle: the run and stop times of each period.
    """

    def __init__(self, root: int, cycle: DutyCycle) -> None:
        self._root = root
        self._cycle = cycle
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._pids: list[int] = []
        self._listed_at = float("-inf")

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="spark-throttle", daemon=True)
            self._thread.start()
            log.warning("injected fault: the Spark server (pid %d) runs %.0f of every %.0f ms",
                        self._root, self._cycle.run_s * 1000,
                        (self._cycle.run_s + self._cycle.stop_s) * 1000)

    def stop(self) -> None:
        """End the cycling; every process of the tree runs afterwards. Idempotent."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
        self._signal(signal.SIGCONT)

    def _run(self) -> None:
        while not self._stopped.is_set():
            now = time.monotonic()
            if now - self._listed_at >= REFRESH_S:
                if not pid_alive(self._root):
                    return  # the server is gone
                self._pids = [self._root, *descendants(self._root)]
                self._listed_at = now
            self._signal(signal.SIGSTOP)
            self._stopped.wait(self._cycle.stop_s)
            self._signal(signal.SIGCONT)
            self._stopped.wait(self._cycle.run_s)

    def _signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to every listed process that still exists."""
        for pid in self._pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
