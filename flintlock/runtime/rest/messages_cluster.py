"""Flink REST v1 bodies of the cluster endpoints Flink's dashboard reads (pure functions).

TaskManagers (``flink-runtime/.../rest/messages/taskmanager/``):

- ``task_manager_info(tm)``: one ``TaskManagerInfo`` of ``GET /taskmanagers``: ``id``, ``path``,
  ``dataPort``, ``jmxPort`` (-1: no JMX), ``timeSinceLastHeartbeat`` (epoch ms of the last
  heartbeat, as Flink's), ``slotsNumber``, ``freeSlots``, ``totalResource`` / ``freeResource``
  (``ResourceProfileInfo``: ``cpuCores`` (float), ``taskHeapMemory``, ``taskOffHeapMemory``,
  ``managedMemory``, ``networkMemory`` in MiB (ints, as Flink's ``getMebiBytes``),
  ``extendedResources`` {}), ``hardware`` (``HardwareDescription``: ``cpuCores``,
  ``physicalMemory``, ``freeMemory`` (the maximum heap), ``managedMemory``; bytes) and
  ``memoryConfiguration`` (``TaskExecutorMemoryConfiguration``; bytes). The total resource is
  the budget the TaskManager registered (``taskexecutor.process_status.total_resource_profile``)
  and the free resource what the ResourceManager's slot tracker leaves of it: a default slot
  holds the total divided by the number of slots (Flink's default slot profile), a dynamic one
  its slot sharing group's profile (fine-grained resources). A TaskManager registered without a
  budget shows its registered cores and memory, each slot an equal share.
- ``task_manager_details(tm, status)``: ``TaskManagerDetailsInfo`` of ``GET /taskmanagers/:id``:
  the info plus ``allocatedSlots`` (``SlotInfo``: ``{"jobId", "resource"}`` per slot allocated to
  a job) and ``metrics`` (``TaskManagerMetricsInfo``, from the TaskManager's ``Status.*``
  metrics; 0 where it reported none, as Flink's handler defaults missing metrics to 0).

- ``pending_task_manager_info(p)``: one entry of ``pendingTaskManagers``, flintlock's addition to
  ``GET /taskmanagers`` (an active ResourceManager's workers not registered yet, or stopping):
  ``id``, ``state`` (``STARTING`` | ``STOPPING``), ``since`` (epoch ms it entered the state),
  ``slotsNumber``, ``cpuCores``, ``taskHeapMemory`` and ``managedMemory`` (MiB; 0: the default
  JVM size). The body's ``heldBack`` (present when not empty) says why fewer TaskManagers are
  started than jobs need (``slotmanager.number-of-slots.max``, start-up failures).

JobManager: ``configuration_info`` (``ConfigurationInfo``, secrets hidden), ``environment_info``
(``EnvironmentInfo``), ``thread_dump_info`` (``ThreadDumpInfo``).
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from flintlock.config import Configuration
from flintlock.config.sensitive import hidden_items
from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.metrics.status import garbage_collectors
from flintlock.runtime.resourcemanager.gateway import PendingTaskManagerInfo, TaskManagerInfo
from flintlock.runtime.taskexecutor.process_status import MEMORY_CONFIGURATION_KEYS
from flintlock.runtime.thread_dump import ThreadInfo

__all__ = [
    "configuration_info",
    "environment_info",
    "pending_task_manager_info",
    "task_manager_details",
    "task_manager_info",
    "task_manager_metrics_info",
    "thread_dump_info",
]

_MIB = 1 << 20

#: ``TaskManagerMetricsInfo`` field -> the ``Status.*`` metric it shows
_TM_METRICS = {
    "heapUsed": "Status.JVM.Memory.Heap.Used",
    "heapCommitted": "Status.JVM.Memory.Heap.Committed",
    "heapMax": "Status.JVM.Memory.Heap.Max",
    "nonHeapUsed": "Status.JVM.Memory.NonHeap.Used",
    "nonHeapCommitted": "Status.JVM.Memory.NonHeap.Committed",
    "nonHeapMax": "Status.JVM.Memory.NonHeap.Max",
    "directCount": "Status.JVM.Memory.Direct.Count",
    "directUsed": "Status.JVM.Memory.Direct.MemoryUsed",
    "directMax": "Status.JVM.Memory.Direct.TotalCapacity",
    "mappedCount": "Status.JVM.Memory.Mapped.Count",
    "mappedUsed": "Status.JVM.Memory.Mapped.MemoryUsed",
    "mappedMax": "Status.JVM.Memory.Mapped.TotalCapacity",
    "memorySegmentsAvailable": "Status.Shuffle.Netty.AvailableMemorySegments",
    "memorySegmentsTotal": "Status.Shuffle.Netty.TotalMemorySegments",
    "nettyShuffleMemorySegmentsAvailable": "Status.Shuffle.Netty.AvailableMemorySegments",
    "nettyShuffleMemorySegmentsUsed": "Status.Shuffle.Netty.UsedMemorySegments",
    "nettyShuffleMemorySegmentsTotal": "Status.Shuffle.Netty.TotalMemorySegments",
    "nettyShuffleMemoryAvailable": "Status.Shuffle.Netty.AvailableMemory",
    "nettyShuffleMemoryUsed": "Status.Shuffle.Netty.UsedMemory",
    "nettyShuffleMemoryTotal": "Status.Shuffle.Netty.TotalMemory",
}


# ---- TaskManagers ---------------------------------------------------------------------------------


def _memory(tm: TaskManagerInfo) -> dict[str, int]:
    return {key: int(tm.memory.get(key, 0)) for key in MEMORY_CONFIGURATION_KEYS}


def _profile(cpu: float, memory: Mapping[str, int], share: float) -> dict[str, Any]:
    """A ``ResourceProfileInfo`` of ``share`` (0..1) of a TaskManager's total resource."""

    def mib(key: str) -> int:
        return int(int(memory[key] * share) // _MIB)

    return {
        "cpuCores": round(cpu * share, 6),
        "taskHeapMemory": mib("taskHeap"),
        "taskOffHeapMemory": mib("taskOffHeap"),
        "managedMemory": mib("managedMemory"),
        "networkMemory": mib("networkMemory"),
        "extendedResources": {},
    }


def _resource_profile_info(profile: ResourceProfile) -> dict[str, Any]:
    """A ``ResourceProfileInfo`` of a slot's or TaskManager's ``ResourceProfile`` (MiB)."""
    return {
        "cpuCores": profile.cpu_cores,
        "taskHeapMemory": profile.task_heap_memory // _MIB,
        "taskOffHeapMemory": profile.task_off_heap_memory // _MIB,
        "managedMemory": profile.managed_memory // _MIB,
        "networkMemory": 0,
        "extendedResources": {},
    }


def _slot_share(tm: TaskManagerInfo) -> float:
    return 1.0 / tm.number_of_slots if tm.number_of_slots > 0 else 0.0


def task_manager_info(tm: TaskManagerInfo) -> dict[str, Any]:
    """One entry of ``GET /taskmanagers`` (Flink ``TaskManagerInfo``; see the module doc)."""
    hw = tm.hardware
    memory = _memory(tm)
    taken = min(len(tm.allocated_slots), tm.number_of_slots)
    return {
        "id": str(tm.resource_id),
        "path": tm.address,
        "dataPort": tm.data_port,
        "jmxPort": -1,
        "timeSinceLastHeartbeat": tm.last_heartbeat_ms,
        "slotsNumber": tm.number_of_slots,
        "freeSlots": tm.free_slots,
        "totalResource": (_resource_profile_info(tm.total_resource)
                          if tm.total_resource is not None else _profile(tm.cpu_cores, memory, 1.0)),
        "freeResource": (_resource_profile_info(tm.free_resource)
                         if tm.free_resource is not None and tm.total_resource is not None
                         else _profile(tm.cpu_cores, memory,
                                       max(0.0, 1.0 - taken * _slot_share(tm)))),
        "hardware": {
            "cpuCores": int(hw.get("cpuCores", 0)),
            "physicalMemory": int(hw.get("physicalMemory", 0)),
            "freeMemory": int(hw.get("freeMemory", 0)),
            "managedMemory": int(hw.get("managedMemory", 0)),
        },
        "memoryConfiguration": memory,
    }


def pending_task_manager_info(pending: PendingTaskManagerInfo) -> dict[str, Any]:
    """One entry of ``pendingTaskManagers`` (see the module doc)."""
    return {
        "id": str(pending.resource_id),
        "state": pending.state,
        "since": pending.since_ms,
        "slotsNumber": pending.number_of_slots,
        "cpuCores": pending.cpu_cores,
        "taskHeapMemory": pending.task_heap_memory // _MIB,
        "managedMemory": pending.managed_memory // _MIB,
    }


def task_manager_metrics_info(status: Mapping[str, float]) -> dict[str, Any]:
    """Flink ``TaskManagerMetricsInfo`` from ``Status.*`` values (0 for missing ones)."""
    body: dict[str, Any] = {field: int(status.get(name, 0)) for field, name in _TM_METRICS.items()}
    body["garbageCollectors"] = garbage_collectors(status)
    return body


def task_manager_details(tm: TaskManagerInfo,
                         status: Mapping[str, float] | None = None) -> dict[str, Any]:
    """``GET /taskmanagers/:id`` (Flink ``TaskManagerDetailsInfo``; see the module doc)."""
    body = task_manager_info(tm)
    slot = _profile(tm.cpu_cores, _memory(tm), _slot_share(tm))
    sizes = [_resource_profile_info(r) for r in tm.allocated_slot_resources]
    if len(sizes) != len(tm.allocated_slots):  # no budget: a share of the total each
        sizes = [dict(slot) for _ in tm.allocated_slots]
    body["allocatedSlots"] = [{"jobId": str(job), "resource": size}
                              for job, size in zip(tm.allocated_slots, sizes, strict=True)]
    body["metrics"] = task_manager_metrics_info(status or {})
    return body


# ---- JobManager -----------------------------------------------------------------------------------


def configuration_info(configuration: Configuration) -> list[dict[str, str]]:
    """Flink ``ConfigurationInfo``: ``[{"key", "value"}]`` sorted by key, secrets hidden."""
    return [{"key": k, "value": v} for k, v in sorted(hidden_items(configuration.to_dict()).items())]


def _interpreter_options() -> list[str]:
    """The interpreter's own command-line options (those before the program and its
    arguments), as a JVM lists its startup options; ``-X`` options included."""
    original = list(getattr(sys, "orig_argv", []))
    program = len(sys.argv)
    options = original[1:len(original) - program] if len(original) > program else []
    return [str(o) for o in options]


def environment_info() -> dict[str, Any]:
    """Flink ``EnvironmentInfo`` of this (the JobManager's) Python process.

    ``jvm``: ``version`` (``"CPython 3.11.2 (main, ...) [GCC 12.2.0]"``; Flink: the JVM's name,
    vendor and version), ``arch`` (``platform.machine()``; Flink: ``os.arch``) and ``options``
    (the interpreter's command-line options; Flink: the JVM's startup options); ``classpath``:
    ``sys.path`` (where modules are imported from; Flink: ``java.class.path``).
    """
    version = f"{platform.python_implementation()} {sys.version}".replace("\n", " ")
    return {
        "jvm": {"version": version, "arch": platform.machine() or os.name,
                "options": _interpreter_options()},
        "classpath": [p for p in sys.path if p],
    }


def thread_dump_info(threads: Iterable[ThreadInfo]) -> dict[str, Any]:
    """Flink ``ThreadDumpInfo``: ``{"threadInfos": [{"threadName", "stringifiedThreadInfo"}]}``."""
    return {"threadInfos": [{"threadName": t.thread_name, "stringifiedThreadInfo": t.stringified}
                            for t in threads]}
