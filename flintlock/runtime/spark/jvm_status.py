"""A TaskManager's embedded Spark server JVM under Flink's names (read through Py4J).

A TaskManager with an embedded Spark Connect server (``SparkSessionProvider`` without
``spark.remote``) has a real JVM that does its tasks' data work; Flink's ``Status.JVM.*``
metrics and its TaskManager memory model describe that JVM as they would describe Flink's own:

- ``jvm_status_values(sc)``: Flink's ``MetricUtils`` status metrics read from the JVM's
  ``java.lang.management`` beans: ``Status.JVM.Memory.{Heap,NonHeap,Metaspace}.{Used,Committed,
  Max}``, ``Status.JVM.Memory.{Direct,Mapped}.{Count,MemoryUsed,TotalCapacity}`` (buffer pools),
  ``Status.JVM.GarbageCollector.<collector>.{Count,Time}`` (spaces in names become ``_``, as in
  Flink's), ``Status.JVM.Threads.Count``, ``Status.JVM.ClassLoader.Classes{Loaded,Unloaded}``,
  ``Status.JVM.CPU.Time`` (ns, from /proc/<jvm pid>/stat: Py4J cannot call the
  ``com.sun.management`` CPU getters) and ``Status.JVM.CPU.Load`` (0..1 since the previous
  reading), and ``Status.Flink.Memory.Managed.{Used,Total}``: Spark's unified memory as its
  block managers report it (``SparkContext.getExecutorMemoryStatus``: the storage memory in use,
  cached and broadcast blocks, and the unified memory's size). Execution memory held by running
  joins, sorts and aggregations is not counted: Py4J cannot reach Spark's memory manager
  (reflecting on ``SparkEnv`` fails on classes missing from the server's class path).
- ``jvm_memory(sc)``: the JVM's memory in Flink's ``TaskExecutorMemoryConfiguration`` terms.
  Spark's memory model splits the heap as Flink's does: Spark's reserved memory (300 MiB) is
  the framework heap, Spark's unified memory (``spark.memory.fraction`` of the rest, for joins,
  sorts, aggregations and caching) plus ``spark.memory.offHeap.size`` is managed memory, and the
  rest of the heap (user memory) is the task heap. Metaspace is ``MaxMetaspaceSize`` when set,
  else the committed metaspace; network memory, framework/task off-heap and JVM overhead are 0
  (flintlock has no network buffer pool; Spark configures none of the others).

``embedded_jvm_status()``, ``embedded_jvm_memory()`` and ``embedded_jvm_heap_max()`` read this
process's embedded server; None
when there is none (``spark.remote``, or no Spark at all) or Py4J fails (logged at debug).
"""

from __future__ import annotations

import logging
import math
import os
import threading
from typing import Any

from flintlock.config.options import parse_memory_bytes
from flintlock.runtime.metrics.status import CPU_LOAD, GC_PREFIX

__all__ = [
    "embedded_jvm_heap_max",
    "embedded_jvm_memory",
    "embedded_jvm_status",
    "jvm_memory",
    "jvm_status_values",
]

log = logging.getLogger(__name__)

#: Spark's ``UnifiedMemoryManager.RESERVED_SYSTEM_MEMORY_BYTES``
SPARK_RESERVED_MEMORY = 300 * 1024 * 1024

#: id of a SparkContext -> its JVM's memory configuration / maximum heap (they do not change)
_memory_cache: dict[int, dict[str, int]] = {}
_heap_cache: dict[int, int] = {}
_memory_lock = threading.Lock()


def _usage(usage: Any) -> tuple[float, float, float]:
    return float(usage.getUsed()), float(usage.getCommitted()), float(usage.getMax())


def _cpu_seconds(pid: int) -> float | None:
    """utime + stime of process ``pid`` in seconds (Linux /proc), None when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _metaspace(mf: Any) -> tuple[float, float, float]:
    for pool in mf.getMemoryPoolMXBeans():
        if str(pool.getName()) == "Metaspace":
            return _usage(pool.getUsage())
    return 0.0, 0.0, -1.0


def _unified_memory(sc: Any) -> tuple[int, int]:
    """(size, bytes in use) of Spark's unified memory over its block managers (one, the
    driver's, in local mode): ``getExecutorMemoryStatus`` maps each to (max, remaining)."""
    total = used = 0
    managers = sc._jsc.sc().getExecutorMemoryStatus().values().iterator()
    while managers.hasNext():
        max_and_remaining = managers.next()
        maximum, remaining = int(max_and_remaining._1()), int(max_and_remaining._2())
        total += maximum
        used += maximum - remaining
    return total, used


def jvm_status_values(sc: Any) -> dict[str, float]:
    """The ``Status.*`` values of ``sc``'s JVM (see the module doc). Raises Py4J's errors."""
    jvm = sc._jvm
    mf = jvm.java.lang.management.ManagementFactory
    memory = mf.getMemoryMXBean()
    values: dict[str, float] = {}
    for kind, usage in (("Heap", memory.getHeapMemoryUsage()),
                        ("NonHeap", memory.getNonHeapMemoryUsage()),
                        ("Metaspace", None)):
        used, committed, maximum = _usage(usage) if usage is not None else _metaspace(mf)
        values[f"Status.JVM.Memory.{kind}.Used"] = used
        values[f"Status.JVM.Memory.{kind}.Committed"] = committed
        values[f"Status.JVM.Memory.{kind}.Max"] = maximum
    pools = {str(b.getName()): b for b in mf.getPlatformMXBeans(
        jvm.java.lang.Class.forName("java.lang.management.BufferPoolMXBean"))}
    for kind, name in (("Direct", "direct"), ("Mapped", "mapped")):
        pool = pools.get(name)
        values[f"Status.JVM.Memory.{kind}.Count"] = float(pool.getCount()) if pool else 0.0
        values[f"Status.JVM.Memory.{kind}.MemoryUsed"] = float(pool.getMemoryUsed()) if pool else 0.0
        values[f"Status.JVM.Memory.{kind}.TotalCapacity"] = (
            float(pool.getTotalCapacity()) if pool else 0.0)
    for collector in mf.getGarbageCollectorMXBeans():
        name = f"{GC_PREFIX}{str(collector.getName()).replace(' ', '_')}"
        values[f"{name}.Count"] = float(collector.getCollectionCount())
        values[f"{name}.Time"] = float(collector.getCollectionTime())
    values["Status.JVM.Threads.Count"] = float(mf.getThreadMXBean().getThreadCount())
    classes = mf.getClassLoadingMXBean()
    values["Status.JVM.ClassLoader.ClassesLoaded"] = float(classes.getLoadedClassCount())
    values["Status.JVM.ClassLoader.ClassesUnloaded"] = float(classes.getUnloadedClassCount())
    runtime = mf.getRuntimeMXBean()
    pid = int(runtime.getPid())
    cpu_s = _cpu_seconds(pid)
    if cpu_s is not None:
        cores = int(jvm.java.lang.Runtime.getRuntime().availableProcessors())
        values["Status.JVM.CPU.Time"] = float(int(cpu_s * 1e9))
        values["Status.JVM.CPU.Load"] = CPU_LOAD.load(("jvm", pid), cpu_s, cores,
                                                      int(runtime.getUptime()) / 1000.0)
    total, used = _unified_memory(sc)
    values["Status.Flink.Memory.Managed.Used"] = float(used)
    values["Status.Flink.Memory.Managed.Total"] = float(total)
    return values


def _off_heap_bytes(conf: Any) -> int:
    if str(conf.get("spark.memory.offHeap.enabled", "false")).strip().lower() != "true":
        return 0
    try:
        return parse_memory_bytes(str(conf.get("spark.memory.offHeap.size", "0")))
    except ValueError:
        return 0


def off_heap_bytes(settings: Any) -> int:
    """``spark.memory.offHeap.size`` in bytes when off-heap memory is enabled, else 0
    (``settings``: anything with ``get(key, default)``, a SparkConf or a dict)."""
    return _off_heap_bytes(settings)


def driver_memory_for(task_heap: int, managed: int, fraction: float = 0.6) -> int:
    """The JVM heap (``spark.driver.memory``, bytes) whose task heap and on-heap unified
    memory hold at least ``task_heap`` and ``managed`` bytes: the inverse of ``jvm_memory``
    (heap = 300 MiB reserved + the rest, split ``1 - fraction`` : ``fraction``), plus 15%:
    ``Runtime.maxMemory`` stays below ``-Xmx`` by a survivor space, which under ParallelGC (the
    embedded server's collector) is large (measured: ``-Xmx3531m`` gave a maximum of 3140 MiB,
    0.89)."""
    if not 0 < fraction < 1:
        raise ValueError(f"spark.memory.fraction must be in (0, 1), got {fraction}")
    usable = max(task_heap / (1 - fraction), managed / fraction)
    return int(math.ceil((SPARK_RESERVED_MEMORY + usable) * 1.15))


def jvm_memory(sc: Any) -> dict[str, int]:
    """``sc``'s JVM as Flink's ``TaskExecutorMemoryConfiguration`` (bytes; see the module doc).

    Computed once per SparkContext (the heap's maximum and Spark's memory settings do not
    change while its JVM lives)."""
    with _memory_lock:
        cached = _memory_cache.get(id(sc))
    if cached is not None:
        return dict(cached)
    jvm = sc._jvm
    mf = jvm.java.lang.management.ManagementFactory
    conf = sc.getConf()
    heap = int(jvm.java.lang.Runtime.getRuntime().maxMemory())
    reserved = min(heap, int(conf.get("spark.testing.reservedMemory", str(SPARK_RESERVED_MEMORY))))
    off_heap = _off_heap_bytes(conf)
    try:  # what Spark's UnifiedMemoryManager computed: on-heap plus off-heap unified memory
        unified = max(0, _unified_memory(sc)[0] - off_heap)
    except Exception:
        unified = int((heap - reserved) * float(conf.get("spark.memory.fraction", "0.6")))
    _used, committed, maximum = _metaspace(mf)
    metaspace = int(maximum if maximum >= 0 else committed)
    task_heap = max(0, heap - reserved - unified)
    total_flink = reserved + task_heap + unified + off_heap
    memory = {
        "frameworkHeap": reserved, "taskHeap": task_heap, "frameworkOffHeap": 0,
        "taskOffHeap": 0, "networkMemory": 0, "managedMemory": unified + off_heap,
        "jvmMetaspace": metaspace, "jvmOverhead": 0, "totalFlinkMemory": total_flink,
        "totalProcessMemory": total_flink + metaspace,
    }
    with _memory_lock:
        _memory_cache[id(sc)] = memory
    return dict(memory)


def _embedded(read: Any) -> Any:
    from flintlock.runtime.spark.session import embedded_spark_context

    sc = embedded_spark_context()
    if sc is None:
        return None
    try:
        return read(sc)
    except Exception:
        log.debug("reading the embedded Spark server's JVM failed", exc_info=True)
        return None


def embedded_jvm_status() -> dict[str, float] | None:
    """``jvm_status_values`` of this process's embedded Spark server (None: none, or failed)."""
    result: dict[str, float] | None = _embedded(jvm_status_values)
    return result


def embedded_jvm_memory() -> dict[str, int] | None:
    """``jvm_memory`` of this process's embedded Spark server (None: none, or failed)."""
    result: dict[str, int] | None = _embedded(jvm_memory)
    return result


def embedded_jvm_heap_max() -> int | None:
    """The maximum heap (``Runtime.maxMemory``, bytes) of this process's embedded Spark server
    (None: none, or failed)."""
    result: int | None = _embedded(_heap_max)
    return result


def _heap_max(sc: Any) -> int:
    with _memory_lock:
        cached = _heap_cache.get(id(sc))
    if cached is None:
        cached = int(sc._jvm.java.lang.Runtime.getRuntime().maxMemory())
        with _memory_lock:
            _heap_cache[id(sc)] = cached
    return cached
