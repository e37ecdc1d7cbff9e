"""Flink's ``Status.*`` metrics (``MetricUtils.instantiateStatusMetrics``) for a Python process.

Flink's dashboard reads a JVM's memory, threads, CPU and garbage collection under Flink's names.
A flintlock JobManager is a Python process, and so is a TaskManager whose Spark runs elsewhere
(``spark.remote``); ``python_status_values()`` maps such a process onto those names (a
TaskManager with an embedded Spark server reports that JVM's own values instead, see
``flintlock.runtime.spark.jvm_status``). Bytes, counts and milliseconds unless noted:

- ``Status.JVM.Memory.Heap.Used``: anonymous resident memory (``RssAnon`` of /proc/self/status:
  Python objects, malloc arenas, thread stacks); ``.Committed``: that plus its swapped-out part
  (``VmSwap``); ``.Max``: the memory this process may use (its cgroup's ``memory.max``, else
  ``RLIMIT_AS``, else the machine's physical memory).
- ``Status.JVM.Memory.NonHeap.Used`` / ``.Committed``: resident file-backed and shared memory
  (``RssFile`` + ``RssShmem``: the interpreter, shared libraries, extension modules); ``.Max``
  ``-1`` (undefined, as a JVM reports it).
- ``Status.JVM.Memory.Metaspace.*``: Python has no class metadata space: 0, 0 and Max ``-1``.
- ``Status.JVM.Memory.Direct.MemoryUsed`` / ``.TotalCapacity``: bytes allocated by Arrow's
  default memory pool (Arrow buffers live outside Python's heap, as direct buffers live outside a
  JVM's); 0 when pyarrow is not loaded. ``.Count`` is 0: Arrow does not count live buffers.
- ``Status.JVM.Memory.Mapped.*``: 0 (flintlock keeps no memory-mapped buffers).
- ``Status.JVM.Threads.Count``: threads of the process (``Threads`` of /proc/self/status,
  including threads of C libraries such as gRPC; else the live Python threads).
- ``Status.JVM.CPU.Time``: user + system CPU time of the process in nanoseconds, as Flink's;
  ``Status.JVM.CPU.Load``: the share of the machine's CPUs the process used since the previous
  reading (0..1; the first reading: since this module was loaded).
- ``Status.JVM.GarbageCollector.Python_gen<N>.Count`` / ``.Time``: collections of CPython's
  cyclic collector per generation (``gc.get_stats``) and the time spent in them, measured by a
  ``gc.callbacks`` hook installed with the first reading (earlier collections took no time).
- ``Status.JVM.ClassLoader.ClassesLoaded``: imported modules; ``.ClassesUnloaded``: 0.
"""

from __future__ import annotations

import gc
import os
import resource
import sys
import threading
import time
from collections.abc import Iterable, Mapping

__all__ = [
    "GC_PREFIX",
    "JOB_MANAGER_DASHBOARD_METRICS",
    "TASK_MANAGER_DASHBOARD_METRICS",
    "CpuLoadSampler",
    "garbage_collectors",
    "memory_limit_bytes",
    "physical_memory_bytes",
    "python_status_values",
]

#: the names Flink's dashboard asks ``/taskmanagers/:id/metrics`` for
TASK_MANAGER_DASHBOARD_METRICS = (
    "Status.JVM.Memory.Heap.Used", "Status.JVM.Memory.Heap.Max",
    "Status.Shuffle.Netty.UsedMemory", "Status.Shuffle.Netty.TotalMemory",
    "Status.Flink.Memory.Managed.Used", "Status.Flink.Memory.Managed.Total",
    "Status.JVM.Memory.Metaspace.Used", "Status.JVM.Memory.Metaspace.Max",
)
#: the names Flink's dashboard asks ``/jobmanager/metrics`` for (plus the garbage collectors')
JOB_MANAGER_DASHBOARD_METRICS = (
    "Status.JVM.Memory.Heap.Used", "Status.JVM.Memory.Heap.Max",
    "Status.JVM.Memory.Heap.Committed", "Status.JVM.Memory.Metaspace.Used",
    "Status.JVM.Memory.Metaspace.Max", "Status.JVM.Memory.NonHeap.Committed",
    "Status.JVM.Memory.NonHeap.Used", "Status.JVM.Memory.NonHeap.Max",
    "Status.JVM.Memory.Direct.Count", "Status.JVM.Memory.Direct.MemoryUsed",
    "Status.JVM.Memory.Direct.TotalCapacity", "Status.JVM.Memory.Mapped.Count",
    "Status.JVM.Memory.Mapped.MemoryUsed", "Status.JVM.Memory.Mapped.TotalCapacity",
)
GC_PREFIX = "Status.JVM.GarbageCollector."

_MIN_LOAD_INTERVAL_S = 0.5


class CpuLoadSampler:
    """A process's CPU load between readings (what a JVM's ``getProcessCpuLoad`` reports).

    ``load(key, cpu_s, cores, since_s)``: ``cpu_s`` is the process's CPU time so far (seconds),
    ``cores`` the CPUs it may use; with no earlier reading of ``key`` the load is the average
    over the last ``since_s`` seconds (its uptime, or since a known baseline). Readings closer
    than 0.5 s to the previous one return the previous load. Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[object, tuple[float, float, float]] = {}  # key -> (wall, cpu, load)

    def load(self, key: object, cpu_s: float, cores: int, since_s: float) -> float:
        now = time.monotonic()
        with self._lock:
            previous = self._last.get(key)
            if previous is not None and now - previous[0] < _MIN_LOAD_INTERVAL_S:
                return previous[2]
            if previous is None:
                wall, cpu = max(since_s, 1e-3), cpu_s
            else:
                wall, cpu = now - previous[0], cpu_s - previous[1]
            value = min(1.0, max(0.0, cpu / wall / max(1, cores)))
            self._last[key] = (now, cpu_s, value)
            return value


#: shared by every reader of this process (REST, Prometheus, the TaskExecutor)
CPU_LOAD = CpuLoadSampler()
_LOADED_AT = (time.monotonic(), sum(os.times()[:2]))


class _GcTimer:
    """Time spent in each generation's collections (a ``gc.callbacks`` hook)."""

    def __init__(self) -> None:
        self.time_ms = [0.0, 0.0, 0.0]
        self._started: float | None = None

    def __call__(self, phase: str, info: Mapping[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            generation = min(max(int(info.get("generation", 0)), 0), 2)
            self.time_ms[generation] += (time.perf_counter() - self._started) * 1000.0
            self._started = None


_GC_TIMER = _GcTimer()
_GC_TIMER_LOCK = threading.Lock()


def _install_gc_timer() -> None:
    with _GC_TIMER_LOCK:
        if _GC_TIMER not in gc.callbacks:
            gc.callbacks.append(_GC_TIMER)


def _proc_status(path: str = "/proc/self/status") -> dict[str, int]:
    """``VmRSS``, ``RssAnon``, ... in bytes and ``Threads`` of a /proc status file ({} if absent)."""
    values: dict[str, int] = {}
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                name, _, rest = line.partition(":")
                parts = rest.split()
                if name == "Threads" and parts:
                    values[name] = int(parts[0])
                elif len(parts) == 2 and parts[1] == "kB":
                    values[name] = int(parts[0]) * 1024
    except (OSError, ValueError):
        pass
    return values


def physical_memory_bytes() -> int:
    """This machine's physical memory in bytes (``-1`` when unknown)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return -1


def _cgroup_limit() -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            return int(text)
    return None


def memory_limit_bytes() -> int:
    """What this process may use: its cgroup limit, else ``RLIMIT_AS``, else physical memory
    (the smallest that is set; ``-1`` when none is known)."""
    physical = physical_memory_bytes()
    limits = [v for v in (_cgroup_limit(), _rlimit_as(), physical) if v is not None and v > 0]
    return min(limits) if limits else -1


def _rlimit_as() -> int | None:
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _arrow_bytes() -> int:
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is None:
        return 0
    try:
        return int(pyarrow.default_memory_pool().bytes_allocated())
    except Exception:  # pragma: no cover - a pyarrow without a default pool
        return 0


def python_status_values() -> dict[str, float]:
    """This Python process under Flink's ``Status.JVM.*`` names (mapping: module doc)."""
    _install_gc_timer()
    status = _proc_status()
    rss = status.get("VmRSS", 0)
    anon = status.get("RssAnon", rss)
    file_backed = status.get("RssFile", 0) + status.get("RssShmem", 0)
    times = os.times()
    cpu_s = times.user + times.system
    cores = os.cpu_count() or 1
    load = CPU_LOAD.load("python", cpu_s, cores, time.monotonic() - _LOADED_AT[0])
    arrow = float(_arrow_bytes())
    values: dict[str, float] = {
        "Status.JVM.Memory.Heap.Used": float(anon),
        "Status.JVM.Memory.Heap.Committed": float(anon + status.get("VmSwap", 0)),
        "Status.JVM.Memory.Heap.Max": float(memory_limit_bytes()),
        "Status.JVM.Memory.NonHeap.Used": float(file_backed),
        "Status.JVM.Memory.NonHeap.Committed": float(file_backed),
        "Status.JVM.Memory.NonHeap.Max": -1.0,
        "Status.JVM.Memory.Metaspace.Used": 0.0,
        "Status.JVM.Memory.Metaspace.Committed": 0.0,
        "Status.JVM.Memory.Metaspace.Max": -1.0,
        "Status.JVM.Memory.Direct.Count": 0.0,
        "Status.JVM.Memory.Direct.MemoryUsed": arrow,
        "Status.JVM.Memory.Direct.TotalCapacity": arrow,
        "Status.JVM.Memory.Mapped.Count": 0.0,
        "Status.JVM.Memory.Mapped.MemoryUsed": 0.0,
        "Status.JVM.Memory.Mapped.TotalCapacity": 0.0,
        "Status.JVM.Threads.Count": float(status.get("Threads", threading.active_count())),
        "Status.JVM.CPU.Time": float(int(cpu_s * 1e9)),
        "Status.JVM.CPU.Load": load,
        "Status.JVM.ClassLoader.ClassesLoaded": float(len(sys.modules)),
        "Status.JVM.ClassLoader.ClassesUnloaded": 0.0,
    }
    for generation, stats in enumerate(gc.get_stats()[:3]):
        name = f"{GC_PREFIX}Python_gen{generation}"
        values[f"{name}.Count"] = float(stats.get("collections", 0))
        values[f"{name}.Time"] = float(int(_GC_TIMER.time_ms[generation]))
    return values


def garbage_collectors(values: Mapping[str, float]) -> list[dict[str, object]]:
    """Flink's ``TaskManagerMetricsInfo.garbageCollectors`` (``[{"name", "count", "time"}]``)
    from ``Status.JVM.GarbageCollector.<name>.Count`` / ``.Time`` values, in name order."""
    names: list[str] = sorted({key[len(GC_PREFIX):].rsplit(".", 1)[0]
                               for key in _gc_keys(values)})
    return [{"name": name,
             "count": int(values.get(f"{GC_PREFIX}{name}.Count", 0)),
             "time": int(values.get(f"{GC_PREFIX}{name}.Time", 0))} for name in names]


def _gc_keys(values: Iterable[str]) -> list[str]:
    return [k for k in values if k.startswith(GC_PREFIX) and k.endswith((".Count", ".Time"))]
