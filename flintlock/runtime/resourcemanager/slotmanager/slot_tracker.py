"""SlotTracker: the ResourceManager's pure view of all TaskManager slots and job requirements.

Follows Flink ``resourcemanager/slotmanager/{DefaultSlotTracker,DefaultResourceTracker,
DefaultResourceAllocationStrategy}`` in one small core: typed events in, ``AllocateSlot``
commands out. No asyncio, no RPC; the ``SlotManager`` shell executes the commands.

Allocation policy: whenever a job's declared slot count exceeds its PENDING + ALLOCATED slots, FREE
slots are picked, spread evenly over TaskExecutors (the TaskExecutor with the lowest share of used
slots first; Flink ``taskmanager.load-balance.mode: SLOTS``). Lowering a requirement frees nothing:
the JobMaster frees the slots it no longer needs through their TaskExecutor.
"""

from __future__ import annotations

import enum
import functools
import heapq
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from flintlock.runtime.ids import AllocationID, JobID, ResourceID, SlotID
from flintlock.runtime.jobgraph.types import IllegalStateTransition
from flintlock.runtime.taskexecutor.gateway import SlotReport

__all__ = [
    "ALLOWED_SLOT_TRANSITIONS",
    "AllocateSlot",
    "BlockedTaskExecutorsChanged",
    "JobRequirementsRemoved",
    "RequirementsCheck",
    "RequirementsDeclared",
    "SlotFreed",
    "SlotReportReceived",
    "SlotRequestAcknowledged",
    "SlotRequestFailed",
    "SlotState",
    "SlotTracker",
    "SlotTrackerEvent",
    "TaskExecutorAdded",
    "TaskExecutorRemoved",
    "TaskManagerSlot",
]

_STORY_LENGTH = 32


class SlotState(enum.Enum):
    """State of a TaskManager slot as the ResourceManager sees it (Flink ``SlotState``).

    ::

        FREE --allocate--> PENDING --ack--> ALLOCATED
          ^                   |                 |
          +----request failed-+                 |
          +-------------freed / reported free---+
        FREE --reported allocated--> ALLOCATED
    """

    FREE = "FREE"  #: not allocated to any job
    PENDING = "PENDING"  #: request_slot sent to the TaskExecutor, no answer yet
    ALLOCATED = "ALLOCATED"  #: allocated to a job (acknowledged or reported by the TaskExecutor)

    def is_terminal(self) -> bool:
        return False


ALLOWED_SLOT_TRANSITIONS: Mapping[SlotState, frozenset[SlotState]] = {
    SlotState.FREE: frozenset({SlotState.PENDING, SlotState.ALLOCATED}),
    SlotState.PENDING: frozenset({SlotState.FREE, SlotState.ALLOCATED}),
    SlotState.ALLOCATED: frozenset({SlotState.FREE}),
}


# ---- events -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlotTrackerEvent:
    """Base of the events the SlotTracker handles; ``cause_id`` traces the external cause."""


@dataclass(frozen=True)
class TaskExecutorAdded(SlotTrackerEvent):
    resource_id: ResourceID
    number_of_slots: int
    cause_id: str = ""


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
    job_id: JobID
    job_master_address: str
    number_of_slots: int
    cause_id: str = ""


@dataclass(frozen=True)
class JobRequirementsRemoved(SlotTrackerEvent):
    job_id: JobID
    cause_id: str = ""


@dataclass(frozen=True)
class _SlotAllocationEvent(SlotTrackerEvent):
    """About one allocation of one slot; ignored once the slot holds another allocation."""

    slot_id: SlotID
    allocation_id: AllocationID


@dataclass(frozen=True)
class SlotRequestAcknowledged(_SlotAllocationEvent):
    """The TaskExecutor allocated the slot; ``version``: its slot table's version with the
    allocation in it (``SlotReport.version``; 0: unknown)."""

    cause_id: str = ""
    version: int = 0


@dataclass(frozen=True)
class SlotRequestFailed(_SlotAllocationEvent):
    """The TaskExecutor refused or did not answer; the slot is FREE again, no re-check now."""

    cause: str = ""
    cause_id: str = ""


@dataclass(frozen=True)
class SlotFreed(_SlotAllocationEvent):
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


# ---- state ------------------------------------------------------------------------------------


@dataclass
class TaskManagerSlot:
    """One slot of a registered TaskExecutor (Flink ``TaskManagerSlotInformation``)."""

    slot_id: SlotID
    state: SlotState = SlotState.FREE
    job_id: JobID | None = None
    allocation_id: AllocationID | None = None
    #: the TaskExecutor's slot table version that holds the current allocation (from the
    #: request's answer or the report that showed it); older reports do not change the slot
    version: int = 0
    #: bounded history of this slot's transitions
    story: deque[str] = field(default_factory=lambda: deque(maxlen=_STORY_LENGTH))

    @property
    def resource_id(self) -> ResourceID:
        return self.slot_id.resource_id


@dataclass
class _JobRequirement:
    job_master_address: str
    number_of_slots: int


class SlotTracker:
    """Slots of registered TaskExecutors, per-job requirements, and allocation decisions.

    Args:
        validate: run ``validate()`` after every event (tests switch it on).
    """

    def __init__(self, validate: bool = False) -> None:
        self._validate_each_step = validate
        #: resource id -> slot number -> slot, in registration order
        self._task_executors: dict[ResourceID, dict[int, TaskManagerSlot]] = {}
        self._requirements: dict[JobID, _JobRequirement] = {}
        #: per TaskExecutor: number of FREE slots, and a min-heap of their slot numbers (stale
        #: entries of slots no longer FREE are dropped lazily), so picking a slot is O(log n)
        self._free_count: dict[ResourceID, int] = {}
        self._free_heap: dict[ResourceID, list[int]] = {}
        #: TaskExecutors whose free slots are not allocated (blocked slow nodes)
        self.blocked: frozenset[ResourceID] = frozenset()

    # ---- queries -------------------------------------------------------------------------------

    def task_executors(self) -> list[ResourceID]:
        return list(self._task_executors)

    def slots(self, resource_id: ResourceID | None = None) -> list[TaskManagerSlot]:
        if resource_id is not None:
            return list(self._task_executors.get(resource_id, {}).values())
        return [s for slots in self._task_executors.values() for s in slots.values()]

    def slot(self, slot_id: SlotID) -> TaskManagerSlot | None:
        return self._task_executors.get(slot_id.resource_id, {}).get(slot_id.slot_number)

    def number_of_slots(self, resource_id: ResourceID | None = None) -> int:
        return len(self.slots(resource_id))

    def number_of_free_slots(self, resource_id: ResourceID | None = None) -> int:
        if resource_id is not None:
            return self._free_count.get(resource_id, 0)
        return sum(self._free_count.values())

    def number_of_free_and_blocked_slots(self) -> int:
        return sum(self._free_count.get(r, 0) for r in self.blocked)

    def required_slots(self, job_id: JobID) -> int:
        req = self._requirements.get(job_id)
        return req.number_of_slots if req else 0

    def acquired_slots(self, job_id: JobID) -> int:
        """PENDING + ALLOCATED slots of ``job_id``."""
        return sum(1 for s in self.slots() if s.job_id == job_id)

    def missing_slots(self, job_id: JobID) -> int:
        return max(0, self.required_slots(job_id) - self.acquired_slots(job_id))

    def jobs(self) -> list[JobID]:
        return list(self._requirements)

    def story(self, slot_id: SlotID) -> str:
        slot = self.slot(slot_id)
        return "\n".join(slot.story) if slot else ""

    # ---- events --------------------------------------------------------------------------------

    def handle(self, event: SlotTrackerEvent) -> list[AllocateSlot]:
        """Apply ``event``; returns the slot requests to send."""
        commands = self._handle(event)
        if self._validate_each_step:
            self.validate()
        return commands

    @functools.singledispatchmethod
    def _handle(self, event: SlotTrackerEvent) -> list[AllocateSlot]:
        raise TypeError(f"unknown slot tracker event {event!r}")

    @_handle.register
    def _(self, event: TaskExecutorAdded) -> list[AllocateSlot]:
        slots = self._task_executors.setdefault(event.resource_id, {})
        for number in range(event.number_of_slots):
            if number not in slots:
                slot = TaskManagerSlot(SlotID(event.resource_id, number))
                slot.story.append(f"registered FREE cause={event.cause_id}")
                slots[number] = slot
                self._mark_free(slot)
        return self._check_requirements(event.cause_id)

    @_handle.register
    def _(self, event: TaskExecutorRemoved) -> list[AllocateSlot]:
        self._task_executors.pop(event.resource_id, None)
        self._free_count.pop(event.resource_id, None)
        self._free_heap.pop(event.resource_id, None)
        return self._check_requirements(event.cause_id)

    @_handle.register
    def _(self, event: SlotReportReceived) -> list[AllocateSlot]:
        slots = self._task_executors.get(event.resource_id)
        if slots is None:
            return []
        for status in event.slot_report.slots:
            if status.slot_id.resource_id != event.resource_id:
                continue
            slot = slots.get(status.slot_id.slot_number)
            if slot is None:
                slot = TaskManagerSlot(status.slot_id)
                slot.story.append(f"reported FREE cause={event.cause_id}")
                slots[status.slot_id.slot_number] = slot
                self._mark_free(slot)
            if event.slot_report.version < slot.version:
                slot.story.append(f"ignored a report of version {event.slot_report.version} "
                                  f"< {slot.version} cause={event.cause_id}")
                continue  # built before the allocation we know of, and overtaken by its answer
            self._reconcile(slot, status.allocation_id, status.job_id, event.cause_id)
            if slot.state is SlotState.ALLOCATED:
                slot.version = max(slot.version, event.slot_report.version)
        return self._check_requirements(event.cause_id)

    @_handle.register
    def _(self, event: RequirementsDeclared) -> list[AllocateSlot]:
        if event.number_of_slots < 0:
            raise ValueError(f"negative slot requirement {event.number_of_slots} of {event.job_id}")
        self._requirements[event.job_id] = _JobRequirement(
            event.job_master_address, event.number_of_slots
        )
        return self._check_requirements(event.cause_id)

    @_handle.register
    def _(self, event: JobRequirementsRemoved) -> list[AllocateSlot]:
        self._requirements.pop(event.job_id, None)
        return self._check_requirements(event.cause_id)

    @_handle.register
    def _(self, event: SlotRequestAcknowledged) -> list[AllocateSlot]:
        slot = self._slot_of(event)
        if slot is not None and slot.state is SlotState.PENDING:
            self._transition(slot, SlotState.ALLOCATED, slot.job_id, slot.allocation_id,
                             f"acknowledged version={event.version} cause={event.cause_id}")
            slot.version = event.version
        return []

    @_handle.register
    def _(self, event: SlotRequestFailed) -> list[AllocateSlot]:
        slot = self._slot_of(event)
        if slot is not None and slot.state is SlotState.PENDING:
            self._transition(slot, SlotState.FREE, None, None,
                             f"request failed ({event.cause}) cause={event.cause_id}")
        return []  # the shell re-checks after a back-off

    @_handle.register
    def _(self, event: SlotFreed) -> list[AllocateSlot]:
        slot = self._slot_of(event)
        if slot is not None and slot.state is not SlotState.FREE:
            self._transition(slot, SlotState.FREE, None, None,
                             f"freed version={event.version} cause={event.cause_id}")
            slot.version = max(slot.version, event.version)
        return []  # the shell re-checks after a short delay (a slot freed right after its
        # allocation, e.g. its JobMaster is unreachable, must not loop at full speed)

    @_handle.register
    def _(self, event: RequirementsCheck) -> list[AllocateSlot]:
        return self._check_requirements(event.cause_id)

    @_handle.register
    def _(self, event: BlockedTaskExecutorsChanged) -> list[AllocateSlot]:
        self.blocked = event.blocked
        return self._check_requirements(event.cause_id)

    # ---- internals -----------------------------------------------------------------------------

    def _slot_of(self, event: _SlotAllocationEvent) -> TaskManagerSlot | None:
        """The event's slot, if it still holds the event's allocation."""
        slot = self.slot(event.slot_id)
        return slot if slot is not None and slot.allocation_id == event.allocation_id else None

    def _reconcile(self, slot: TaskManagerSlot, allocation_id: AllocationID | None,
                   job_id: JobID | None, cause_id: str) -> None:
        """Make ``slot`` agree with what its TaskExecutor reported."""
        why = f"slot report cause={cause_id}"
        if allocation_id is None:
            # PENDING stays: the report may predate our request_slot (Flink DefaultSlotTracker).
            if slot.state is SlotState.ALLOCATED:
                self._transition(slot, SlotState.FREE, None, None, why)
            return
        if slot.allocation_id == allocation_id:
            if slot.state is SlotState.PENDING:
                self._transition(slot, SlotState.ALLOCATED, slot.job_id, allocation_id, why)
            return
        if slot.state is SlotState.ALLOCATED:
            self._transition(slot, SlotState.FREE, None, None, why)
        self._transition(slot, SlotState.ALLOCATED, job_id, allocation_id, why)

    def _transition(self, slot: TaskManagerSlot, target: SlotState, job_id: JobID | None,
                    allocation_id: AllocationID | None, why: str) -> None:
        if target not in ALLOWED_SLOT_TRANSITIONS[slot.state]:
            raise IllegalStateTransition(f"TaskManagerSlot {slot.slot_id}", slot.state, target,
                                         "\n".join(slot.story))
        slot.story.append(
            f"{slot.state.value} -> {target.value} job={job_id} allocation={allocation_id} {why}"
        )
        was_free = slot.state is SlotState.FREE
        slot.state = target
        slot.job_id = job_id
        slot.allocation_id = allocation_id
        if target is SlotState.FREE and not was_free:
            self._mark_free(slot)
        elif was_free and target is not SlotState.FREE:
            self._free_count[slot.resource_id] -= 1

    def _mark_free(self, slot: TaskManagerSlot) -> None:
        rid = slot.resource_id
        self._free_count[rid] = self._free_count.get(rid, 0) + 1
        heapq.heappush(self._free_heap.setdefault(rid, []), slot.slot_id.slot_number)

    def _check_requirements(self, cause_id: str) -> list[AllocateSlot]:
        commands: list[AllocateSlot] = []
        for job_id, requirement in self._requirements.items():
            for _ in range(self.missing_slots(job_id)):
                slot = self._pick_free_slot()
                if slot is None:
                    return commands
                allocation_id = AllocationID.generate()
                self._transition(slot, SlotState.PENDING, job_id, allocation_id,
                                 f"requested cause={cause_id}")
                commands.append(AllocateSlot(slot.slot_id, job_id, allocation_id,
                                             requirement.job_master_address, cause_id))
        return commands

    def _pick_free_slot(self) -> TaskManagerSlot | None:
        """A FREE slot of the TaskExecutor with the lowest share of used slots (SLOTS mode);
        within it the lowest slot number."""
        best: tuple[float, int, int] | None = None
        best_rid: ResourceID | None = None
        for order, (rid, slots) in enumerate(self._task_executors.items()):
            free = self._free_count.get(rid, 0)
            if not free or rid in self.blocked:
                continue
            used = len(slots) - free
            key = (used / len(slots), used, order)
            if best is None or key < best:
                best, best_rid = key, rid
        if best_rid is None:
            return None
        heap, slots = self._free_heap[best_rid], self._task_executors[best_rid]
        while heap and slots[heap[0]].state is not SlotState.FREE:
            heapq.heappop(heap)  # stale: the slot was taken since it was pushed
        return slots[heap[0]]

    # ---- invariants ----------------------------------------------------------------------------

    def validate(self) -> None:
        """Check the invariants; raises AssertionError naming the broken one."""
        seen: dict[AllocationID, SlotID] = {}
        for resource_id, slots in self._task_executors.items():
            for number, slot in slots.items():
                where = f"slot {slot.slot_id}: {slot.state} job={slot.job_id} " \
                        f"allocation={slot.allocation_id}"
                assert slot.slot_id == SlotID(resource_id, number), where
                if slot.state is SlotState.FREE:
                    assert slot.job_id is None and slot.allocation_id is None, where
                else:
                    assert slot.job_id is not None and slot.allocation_id is not None, where
                    assert slot.allocation_id not in seen, \
                        f"{where}: allocation also on {seen.get(slot.allocation_id)}"
                    seen[slot.allocation_id] = slot.slot_id
        for job_id, requirement in self._requirements.items():
            assert requirement.number_of_slots >= 0, f"job {job_id}: negative requirement"
        for resource_id, slots in self._task_executors.items():
            free = {n for n, slot in slots.items() if slot.state is SlotState.FREE}
            assert self._free_count.get(resource_id, 0) == len(free), f"{resource_id}: free count"
            assert free <= set(self._free_heap.get(resource_id, ())), f"{resource_id}: free heap"
