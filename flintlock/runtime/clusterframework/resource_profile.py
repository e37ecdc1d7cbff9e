"""ResourceProfile: the resources of a slot, a slot request or a TaskManager (pure value).

Follows Flink ``runtime/clusterframework/types/ResourceProfile`` (fine-grained resource
management, FLIP-56 / FLIP-156): CPU cores (float; compared at 1e-6 cores, as Flink's
``CPUResource`` is a ``BigDecimal``) and task heap, task off-heap and managed memory (bytes).

- ``ResourceProfile.UNKNOWN``: a request that names no resources (a slot sharing group without a
  ``ResourceSpec``). The ResourceManager serves it with a TaskManager's *default slot*, its total
  divided by ``taskmanager.numberOfTaskSlots``.
- ``ResourceProfile.ZERO``: nothing.
- A TaskManager whose memory is unknown (``memory_accounted=False`` in ``fits``: a remote Spark
  server, whose JVM the TaskManager cannot size) is matched on CPU only.

Memory maps onto Spark as ``spark.driver.memory`` of a TaskManager's embedded server, and CPU as
its ``local[<cores>]`` (``docs/design.md``, "Fine-grained resources").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

__all__ = ["ResourceProfile"]

_CPU_EPSILON = 1e-6
_MIB = 1024 * 1024


def _cpu(value: float) -> float:
    return round(float(value), 6)


@dataclass(frozen=True, order=True)
class ResourceProfile:
    """CPU cores and memory (bytes) of a slot; ``unknown`` marks ``UNKNOWN``.

    Raises:
        ValueError: a negative or non-finite amount.
    """

    cpu_cores: float = 0.0
    task_heap_memory: int = 0
    task_off_heap_memory: int = 0
    managed_memory: int = 0
    unknown: bool = False

    UNKNOWN: ClassVar[ResourceProfile]
    ZERO: ClassVar[ResourceProfile]

    def __post_init__(self) -> None:
        if not math.isfinite(self.cpu_cores) or self.cpu_cores < 0:
            raise ValueError(f"CPU cores must be a finite number >= 0, got {self.cpu_cores}")
        object.__setattr__(self, "cpu_cores", _cpu(self.cpu_cores))
        for name in ("task_heap_memory", "task_off_heap_memory", "managed_memory"):
            value = getattr(self, name)
            if int(value) != value or value < 0:
                raise ValueError(f"{name} must be a whole number of bytes >= 0, got {value}")
            object.__setattr__(self, name, int(value))

    @classmethod
    def of(cls, cpu_cores: float, task_heap_mb: int = 0, task_off_heap_mb: int = 0,
           managed_mb: int = 0) -> ResourceProfile:
        """A profile from cores and MiB (the units of PyFlink's ``SlotSharingGroup`` builder)."""
        return cls(cpu_cores, task_heap_mb * _MIB, task_off_heap_mb * _MIB, managed_mb * _MIB)

    @property
    def is_unknown(self) -> bool:
        return self.unknown

    def _require_known(self, other: ResourceProfile, what: str) -> None:
        if self.unknown or other.unknown:
            raise ValueError(f"cannot {what} an UNKNOWN resource profile")

    def merge(self, other: ResourceProfile) -> ResourceProfile:
        """The sum of both (Flink ``merge``)."""
        self._require_known(other, "add")
        return ResourceProfile(self.cpu_cores + other.cpu_cores,
                               self.task_heap_memory + other.task_heap_memory,
                               self.task_off_heap_memory + other.task_off_heap_memory,
                               self.managed_memory + other.managed_memory)

    def subtract(self, other: ResourceProfile) -> ResourceProfile:
        """What is left of this after ``other``, never below zero per resource."""
        self._require_known(other, "subtract")
        return ResourceProfile(max(0.0, self.cpu_cores - other.cpu_cores),
                               max(0, self.task_heap_memory - other.task_heap_memory),
                               max(0, self.task_off_heap_memory - other.task_off_heap_memory),
                               max(0, self.managed_memory - other.managed_memory))

    def divide(self, n: int) -> ResourceProfile:
        """One n-th of this (a TaskManager's default slot: total / number of slots)."""
        if n < 1:
            raise ValueError(f"cannot divide a resource profile by {n}")
        if self.unknown:
            return self
        return ResourceProfile(self.cpu_cores / n, self.task_heap_memory // n,
                               self.task_off_heap_memory // n, self.managed_memory // n)

    def fits(self, available: ResourceProfile, memory_accounted: bool = True) -> bool:
        """Whether this fits into ``available`` (Flink ``allFieldsNoLessThan``, reversed); with
        ``memory_accounted=False`` only CPU counts."""
        self._require_known(available, "compare")
        if self.cpu_cores > available.cpu_cores + _CPU_EPSILON:
            return False
        if not memory_accounted:
            return True
        return (self.task_heap_memory <= available.task_heap_memory
                and self.task_off_heap_memory <= available.task_off_heap_memory
                and self.managed_memory <= available.managed_memory)

    def __str__(self) -> str:
        if self.unknown:
            return "ResourceProfile{UNKNOWN}"
        parts = [f"cpuCores={self.cpu_cores:g}"]
        for name, value in (("taskHeapMemory", self.task_heap_memory),
                            ("taskOffHeapMemory", self.task_off_heap_memory),
                            ("managedMemory", self.managed_memory)):
            if value:
                parts.append(f"{name}={value / _MIB:g}mb")
        return "ResourceProfile{" + ", ".join(parts) + "}"


ResourceProfile.UNKNOWN = ResourceProfile(unknown=True)
ResourceProfile.ZERO = ResourceProfile()
