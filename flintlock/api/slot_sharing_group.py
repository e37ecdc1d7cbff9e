"""SlotSharingGroup: a named slot sharing group with the resources one of its slots needs.

PyFlink's ``pyflink.datastream.SlotSharingGroup`` (Flink ``api.common.operators.SlotSharingGroup``,
fine-grained resource management)::

    ssg = (SlotSharingGroup.builder("heavy")
           .set_cpu_cores(1.0).set_task_heap_memory_mb(512).build())
    env.register_slot_sharing_group(ssg)          # or: ds.slot_sharing_group(ssg)
    ds.map(f).slot_sharing_group("heavy")

A group with resources asks for slots of exactly that ``ResourceProfile``; a group without them
(a plain name) gets a TaskManager's default slot (its cores and memory divided by
``taskmanager.numberOfTaskSlots``). A TaskManager offers slots while its total covers them.
"""

from __future__ import annotations

from typing import Any

from flintlock.runtime.clusterframework.resource_profile import ResourceProfile

__all__ = ["SlotSharingGroup", "SlotSharingGroupBuilder"]


class SlotSharingGroup:
    """A slot sharing group's name and, optionally, its slot's resources.

    Attributes:
        name: the group's name.
        resource_profile: ``ResourceProfile.UNKNOWN`` when no resources were given.
    """

    def __init__(self, name: str, resource_profile: ResourceProfile = ResourceProfile.UNKNOWN) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a slot sharing group needs a non-empty name, got {name!r}")
        self.name = name
        self.resource_profile = resource_profile

    @staticmethod
    def builder(name: str) -> SlotSharingGroupBuilder:
        """A builder for the group ``name`` (PyFlink ``SlotSharingGroup.builder``)."""
        return SlotSharingGroupBuilder(name)

    def get_name(self) -> str:
        return self.name

    def get_cpu_cores(self) -> float | None:
        return None if self.resource_profile.is_unknown else self.resource_profile.cpu_cores

    def get_task_heap_memory(self) -> int | None:
        """Bytes, or None without resources."""
        return None if self.resource_profile.is_unknown else self.resource_profile.task_heap_memory

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, SlotSharingGroup) and other.name == self.name
                and other.resource_profile == self.resource_profile)

    def __hash__(self) -> int:
        return hash((self.name, self.resource_profile))

    def __repr__(self) -> str:
        return f"SlotSharingGroup({self.name!r}, {self.resource_profile})"


_MIB = 1024 * 1024


class SlotSharingGroupBuilder:
    """Sets the resources of one group's slot; CPU cores and task heap memory are required
    together, as in Flink (``SlotSharingGroup.Builder#build``)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._cpu: float | None = None
        self._heap: int | None = None
        self._off_heap = 0
        self._managed = 0

    def set_cpu_cores(self, cpu_cores: float) -> SlotSharingGroupBuilder:
        """CPU cores of one slot (> 0; fractions allowed, e.g. 0.5)."""
        if isinstance(cpu_cores, bool) or not isinstance(cpu_cores, (int, float)) or not cpu_cores > 0:
            raise ValueError(f"slot sharing group {self._name!r}: CPU cores must be > 0, "
                             f"got {cpu_cores!r}")
        self._cpu = float(cpu_cores)
        return self

    def set_task_heap_memory_mb(self, mb: int) -> SlotSharingGroupBuilder:
        """Task heap memory of one slot (MiB, > 0)."""
        self._heap = self._mb(mb, "task heap memory", positive=True)
        return self

    def set_task_heap_memory(self, size_bytes: int) -> SlotSharingGroupBuilder:
        """Task heap memory of one slot (bytes, > 0)."""
        self._heap = self._bytes(size_bytes, "task heap memory", positive=True)
        return self

    def set_task_off_heap_memory_mb(self, mb: int) -> SlotSharingGroupBuilder:
        self._off_heap = self._mb(mb, "task off-heap memory")
        return self

    def set_task_off_heap_memory(self, size_bytes: int) -> SlotSharingGroupBuilder:
        self._off_heap = self._bytes(size_bytes, "task off-heap memory")
        return self

    def set_managed_memory_mb(self, mb: int) -> SlotSharingGroupBuilder:
        self._managed = self._mb(mb, "managed memory")
        return self

    def set_managed_memory(self, size_bytes: int) -> SlotSharingGroupBuilder:
        self._managed = self._bytes(size_bytes, "managed memory")
        return self

    def _mb(self, mb: Any, what: str, positive: bool = False) -> int:
        return self._bytes(mb * _MIB if isinstance(mb, int) and not isinstance(mb, bool) else mb,
                           f"{what} (MiB)", positive)

    def _bytes(self, value: Any, what: str, positive: bool = False) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < (1 if positive else 0):
            raise ValueError(f"slot sharing group {self._name!r}: {what} must be a whole number "
                             f"{'> 0' if positive else '>= 0'}, got {value!r}")
        return value

    def build(self) -> SlotSharingGroup:
        """The group; raises ValueError when only one of CPU cores and task heap memory is set."""
        if self._cpu is None and self._heap is None and not (self._off_heap or self._managed):
            return SlotSharingGroup(self._name)
        if self._cpu is None or self._heap is None:
            raise ValueError(f"slot sharing group {self._name!r}: the CPU cores and the task heap "
                             "memory are required to be set together "
                             "(set_cpu_cores(...).set_task_heap_memory_mb(...))")
        return SlotSharingGroup(self._name, ResourceProfile(self._cpu, self._heap, self._off_heap,
                                                            self._managed))
