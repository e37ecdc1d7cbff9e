"""Resource use of this Python process (Flink's ``Status.JVM.*`` metrics, for Python).

``Status.Python.Memory.RSS`` (bytes), ``Status.Python.CPU.Time`` (ms of user + system CPU) and
``Status.Python.Threads.Count`` (live Python threads), and the event-loop lag of the process
(``Status.Python.EventLoop.*``, ``loop_lag``). A TaskManager's Spark JVM is a separate process
and is not included.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
from dataclasses import dataclass, field

from flintlock.runtime.metrics.loop_lag import LagSummary, loop_lag_metric_values, loop_lag_summary

__all__ = ["ProcessStats", "process_metric_values", "process_stats"]


@dataclass(frozen=True)
class ProcessStats:
    """One reading: ``rss_bytes``, ``cpu_time_ms``, ``threads``, ``pid``, ``loop_lag``."""

    rss_bytes: int
    cpu_time_ms: int
    threads: int
    pid: int
    loop_lag: LagSummary = field(default_factory=LagSummary)


def _rss_bytes() -> int:
    try:  # Linux: current resident set size
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # peak, as a fallback
        return int(peak if sys.platform == "darwin" else peak * 1024)


def process_stats() -> ProcessStats:
    """Read this process's stats now."""
    times = os.times()
    return ProcessStats(
        rss_bytes=_rss_bytes(),
        cpu_time_ms=int((times.user + times.system) * 1000),
        threads=threading.active_count(),
        pid=os.getpid(),
        loop_lag=loop_lag_summary(),
    )


def process_metric_values(stats: ProcessStats) -> dict[str, float]:
    """``Status.Python.*`` metric name -> value."""
    return {
        "Status.Python.Memory.RSS": float(stats.rss_bytes),
        "Status.Python.CPU.Time": float(stats.cpu_time_ms),
        "Status.Python.Threads.Count": float(stats.threads),
        **loop_lag_metric_values(stats.loop_lag),
    }
