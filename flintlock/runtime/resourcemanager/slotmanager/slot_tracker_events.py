"""The SlotTracker's events and commands (typed messages of the pure core in ``slot_tracker``).

Events come from the ResourceManager shell (registrations, slot reports, requirement
declarations, slot request answers); ``AllocateSlot`` commands go back to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.ids import AllocationID, JobID, ResourceID, SlotID
from flintlock.runtime.taskexecutor.gateway import SlotReport

__all__ = [
    "AllocateSlot",
    "BlockedTaskExecutorsChanged",
    "JobRequirementsRemoved",
    "RequirementsCheck",
    "RequirementsDeclared",
    "SlotAllocationEvent",
    "SlotFreed",
    "SlotReportReceived",
    "SlotRequestAcknowledged",
    "SlotRequestFailed",
    "SlotTrackerEvent",
    "TaskExecutorAdded",
    "TaskExecutorRemoved",
]


# ---- events -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlotTrackerEvent:
    """Base of the events the SlotTracker handles; ``cause_id`` traces the external cause."""


@dataclass(frozen=True)
class TaskExecutorAdded(SlotTrackerEvent):
    """A TaskExecutor registered; ``total_resource`` (None: not accounted) and
    ``default_slots`` (``taskmanager.numberOfTaskSlots``) size its default slots."""

    resource_id: ResourceID
    number_of_slots: int
    cause_id: str = ""
    total_resource: ResourceProfile | None = None
    default_slots: int = 0


@dataclass(frozen=True)
class TaskExecutorRemoved(SlotTrackerEvent):
    resource_id: ResourceID
    cause_id: str = ""


@dataclass(frozen=True)
class SlotReportReceived(SlotTrackerEvent):
    resource_id: ResourceID
    slot_report: SlotReport
    cause_id: str = ""


@dataclass(frozen=True)
class RequirementsDeclared(SlotTrackerEvent):
    """A job's requirement: ``resources`` holds (profile, count) pairs; given only
    ``number_of_slots``, that many default (UNKNOWN) slots."""

    job_id: JobID
    job_master_address: str
    number_of_slots: int
    cause_id: str = ""
    resources: tuple[tuple[ResourceProfile, int], ...] = ()

    def requirement(self) -> dict[ResourceProfile, int]:
        if not self.resources:
            return {ResourceProfile.UNKNOWN: self.number_of_slots} if self.number_of_slots else {}
        out: dict[ResourceProfile, int] = {}
        for profile, n in self.resources:
            out[profile] = out.get(profile, 0) + n
        return out


@dataclass(frozen=True)
class JobRequirementsRemoved(SlotTrackerEvent):
    job_id: JobID
    cause_id: str = ""


@dataclass(frozen=True)
class SlotAllocationEvent(SlotTrackerEvent):
    """About one allocation of one slot; ignored once the slot holds another allocation."""

    slot_id: SlotID
    allocation_id: AllocationID


@dataclass(frozen=True)
class SlotRequestAcknowledged(SlotAllocationEvent):
    """The TaskExecutor allocated the slot; ``version``: its slot table's version with the
    allocation in it (``SlotReport.version``; 0: unknown)."""

    cause_id: str = ""
    version: int = 0


@dataclass(frozen=True)
class SlotRequestFailed(SlotAllocationEvent):
    """The TaskExecutor refused or did not answer; the slot is FREE again, no re-check now."""

    cause: str = ""
    cause_id: str = ""


@dataclass(frozen=True)
class SlotFreed(SlotAllocationEvent):
    """The TaskExecutor freed the slot (``notify_slot_available``; ``version``: its slot
    table's version without the allocation, 0: unknown); no re-check now."""

    cause_id: str = ""
    version: int = 0


@dataclass(frozen=True)
class BlockedTaskExecutorsChanged(SlotTrackerEvent):
    """The TaskExecutors whose free slots go to no job now (Flink's blocklist: they run slow
    subtasks of a job with speculative execution)."""

    blocked: frozenset[ResourceID]
    cause_id: str = ""


@dataclass(frozen=True)
class RequirementsCheck(SlotTrackerEvent):
    """Re-check all requirements (the shell sends it after a back-off)."""

    cause_id: str = ""


# ---- commands ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AllocateSlot:
    """Ask the TaskExecutor owning ``slot_id`` to allocate it for ``job_id``."""

    slot_id: SlotID
    job_id: JobID
    allocation_id: AllocationID
    job_master_address: str
    cause_id: str = ""
    resource_profile: ResourceProfile = ResourceProfile.UNKNOWN
