"""What a TaskManager process tells about its resources and state, in Flink's terms.

- ``registration_resources(configuration)``: the ``hardware``, ``cpu_cores`` and ``memory``
  fields of the TaskExecutor's registration (Flink sends its ``HardwareDescription``,
  ``TaskExecutorMemoryConfiguration`` and total ``ResourceProfile`` the same way). CPU cores are
  ``taskmanager.cpu.cores``, else this machine's cores: what the embedded Spark server runs
  ``local[<cores>]`` with. ``memory`` is the embedded Spark server's JVM in Flink's memory model
  (``flintlock.runtime.spark.jvm_status.jvm_memory``); without an embedded server (Spark
  elsewhere, or no Spark) nothing is configured and every entry is 0. ``hardware`` is Flink's:
  ``cpuCores`` and ``physicalMemory`` of the machine, ``freeMemory`` the maximum heap (Flink
  reports its JVM's ``Runtime.maxMemory`` there; a Python TaskManager: the memory the process
  may use, ``status.memory_limit_bytes``) and ``managedMemory``.
- ``task_manager_status()``: Flink's ``Status.*`` metrics of the TaskManager: its embedded Spark
  JVM's when it has one, else the Python process mapped onto them
  (``flintlock.runtime.metrics.status``, with no managed memory), plus
  ``Status.Shuffle.Netty.*`` = 0: flintlock's shuffle writes Arrow files, it has no network
  buffer pool.
"""

from __future__ import annotations

import os
from typing import Any

from flintlock.config.configuration import Configuration
from flintlock.config.options import TM_CPU_CORES
from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.metrics.status import (
    memory_limit_bytes,
    physical_memory_bytes,
    python_status_values,
)
from flintlock.runtime.spark.jvm_status import (
    embedded_jvm_heap_max,
    embedded_jvm_memory,
    embedded_jvm_status,
    off_heap_bytes,
)

__all__ = [
    "MEMORY_CONFIGURATION_KEYS",
    "registration_resources",
    "task_manager_status",
    "total_resource_profile",
]

#: Flink's ``TaskExecutorMemoryConfiguration`` fields, in its order
MEMORY_CONFIGURATION_KEYS = (
    "frameworkHeap", "taskHeap", "frameworkOffHeap", "taskOffHeap", "networkMemory",
    "managedMemory", "jvmMetaspace", "jvmOverhead", "totalFlinkMemory", "totalProcessMemory",
)

_SHUFFLE_NETTY = tuple(
    f"Status.Shuffle.Netty.{name}" for name in (
        "AvailableMemorySegments", "UsedMemorySegments", "TotalMemorySegments",
        "AvailableMemory", "UsedMemory", "TotalMemory"))


def registration_resources(configuration: Configuration) -> dict[str, Any]:
    """``hardware``, ``cpu_cores`` and ``memory`` of a ``TaskExecutorRegistration`` (bytes).

    Reads the embedded Spark server's JVM once per process (a few Py4J calls, cached)."""
    cores = float(configuration.get(TM_CPU_CORES) or os.cpu_count() or 1)
    jvm = embedded_jvm_memory()
    memory = dict(jvm) if jvm is not None else dict.fromkeys(MEMORY_CONFIGURATION_KEYS, 0)
    heap = embedded_jvm_heap_max() if jvm is not None else None
    hardware = {
        "cpuCores": os.cpu_count() or 1,
        "physicalMemory": max(0, physical_memory_bytes()),
        "freeMemory": heap if heap is not None else max(0, memory_limit_bytes()),
        "managedMemory": memory["managedMemory"],
    }
    return {"hardware": hardware, "cpu_cores": cores, "memory": memory}


def total_resource_profile(resources: dict[str, Any], spark_settings: Any) -> ResourceProfile:
    """What this TaskExecutor's slots may hold in all (Flink's ``totalResourceProfile``), from
    ``registration_resources``: its cores; its JVM's task heap; Spark's off-heap memory
    (``spark.memory.offHeap.size``, ``spark_settings``) as task off-heap memory and the rest of
    the managed memory (the on-heap unified memory) as managed memory. Memory is zero when the
    JVM is not known (a remote Spark server): then slots are matched on CPU only."""
    memory = resources["memory"]
    managed = int(memory.get("managedMemory", 0))
    off_heap = min(managed, off_heap_bytes(spark_settings)) if managed else 0
    return ResourceProfile(float(resources["cpu_cores"]), int(memory.get("taskHeap", 0)),
                           off_heap, managed - off_heap)


def task_manager_status() -> dict[str, float]:
    """The TaskManager's ``Status.*`` metrics now (blocking: Py4J calls or /proc reads)."""
    values = embedded_jvm_status()
    if values is None:
        values = {**python_status_values(), "Status.Flink.Memory.Managed.Used": 0.0,
                  "Status.Flink.Memory.Managed.Total": 0.0}
    values.update(dict.fromkeys(_SHUFFLE_NETTY, 0.0))
    return values
