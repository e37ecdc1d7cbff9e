"""SlotTracker: the ResourceManager's pure view of all TaskManager slots and job requirements.

Follows Flink ``resourcemanager/slotmanager/{DefaultSlotTracker,DefaultResourceTracker,
DefaultResourceAllocationStrategy}`` in one small core: typed events in, ``AllocateSlot``
commands out. No asyncio, no RPC; the ``SlotManager`` shell executes the commands.

Allocation policy: whenever a job's declared slot count exceeds its PENDING + ALLOCATED slots, FREE
slots are picked, spread evenly over TaskExecutors (the TaskExecutor with the lowest share of used
slots first; Flink ``taskmanager.load-balance.mode: SLOTS``). Lowering a requirement frees nothing:
the JobMaster frees the slots it no longer needs through their TaskExecutor.

Fine-grained resources (Flink ``FineGrainedSlotManager`` / ``DefaultResourceAllocationStrategy``):
a requirement names a ``ResourceProfile`` per slot. ``UNKNOWN`` is served by a TaskExecutor's
*default* slots (``0..numberOfTaskSlots-1``, each ``total / numberOfTaskSlots``); a known profile
by a *dynamic* slot of exactly that size (numbered from ``numberOfTaskSlots`` up), on the
TaskExecutor with the lowest share of its CPU in use that still has room for it. A dynamic slot
exists while it is PENDING or ALLOCATED. Every TaskExecutor with a known total keeps a budget:
a slot is allocated only if it fits what its allocated slots leave (memory only when the total's
memory is known), so a FREE default slot may be unusable while dynamic slots hold the budget.
"""

from __future__ import annotations

import enum
import functools
import heapq
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.ids import AllocationID, JobID, ResourceID, SlotID
from flintlock.runtime.jobgraph.types import IllegalStateTransition
from flintlock.runtime.resourcemanager.slotmanager.slot_tracker_events import (
    AllocateSlot,
    BlockedTaskExecutorsChanged,
    JobRequirementsRemoved,
    RequirementsCheck,
    RequirementsDeclared,
    SlotAllocationEvent,
    SlotFreed,
    SlotReportReceived,
    SlotRequestAcknowledged,
    SlotRequestFailed,
    SlotTrackerEvent,
    TaskExecutorAdded,
    TaskExecutorRemoved,
)

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
    #: UNKNOWN for a default slot, the slot's size for a dynamic one
    resource_profile: ResourceProfile = ResourceProfile.UNKNOWN

    @property
    def resource_id(self) -> ResourceID:
        return self.slot_id.resource_id

    @property
    def is_dynamic(self) -> bool:
        return not self.resource_profile.is_unknown


@dataclass
class _JobRequirement:
    job_master_address: str
    #: profile -> number of slots
    resources: dict[ResourceProfile, int]

    @property
    def number_of_slots(self) -> int:
        return sum(self.resources.values())


@dataclass(frozen=True)
class _Budget:
    """A TaskExecutor's total resources and default slot count."""

    total: ResourceProfile
    default_slots: int

    @property
    def default_slot(self) -> ResourceProfile:
        return self.total.divide(max(1, self.default_slots))

    @property
    def memory_accounted(self) -> bool:
        return self.total.task_heap_memory > 0


class SlotTracker:
    """Slots of registered TaskExecutors, per-job requirements, and allocation decisions.

    Args:
        validate: run ``validate()`` after every event (tests switch it on).
    """

    def __init__(self, validate: bool = False) -> None:
        self._validate_each_step = validate
        #: resource id -> slot number -> slot, in registration order
        self._task_executors: dict[ResourceID, dict[int, TaskManagerSlot]] = {}
        #: resource id -> its budget (TaskExecutors registered with a known total), and what
        #: its PENDING and ALLOCATED slots hold (kept up to date by ``_transition``)
        self._budgets: dict[ResourceID, _Budget] = {}
        self._used: dict[ResourceID, ResourceProfile] = {}
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
        """FREE default slots that fit their TaskExecutor's budget (all of them when it has
        none)."""
        if resource_id is not None:
            return self._usable_free(resource_id)
        return sum(self._usable_free(r) for r in self._task_executors)

    def number_of_free_and_blocked_slots(self) -> int:
        return sum(self._usable_free(r) for r in self.blocked)

    def total_resource(self, resource_id: ResourceID) -> ResourceProfile | None:
        budget = self._budgets.get(resource_id)
        return budget.total if budget is not None else None

    def available_resource(self, resource_id: ResourceID) -> ResourceProfile | None:
        """The TaskExecutor's total minus what its PENDING and ALLOCATED slots hold."""
        budget = self._budgets.get(resource_id)
        if budget is None:
            return None
        return budget.total.subtract(self._used.get(resource_id, ResourceProfile.ZERO))

    def slot_resource(self, slot: TaskManagerSlot) -> ResourceProfile | None:
        """What ``slot`` holds of its TaskExecutor (None: its TaskExecutor has no budget)."""
        budget = self._budgets.get(slot.resource_id)
        return self._size(slot, budget) if budget is not None else None

    def required_slots(self, job_id: JobID) -> int:
        req = self._requirements.get(job_id)
        return req.number_of_slots if req else 0

    def required_resources(self, job_id: JobID) -> dict[ResourceProfile, int]:
        req = self._requirements.get(job_id)
        return dict(req.resources) if req else {}

    def acquired_slots(self, job_id: JobID, profile: ResourceProfile | None = None) -> int:
        """PENDING + ALLOCATED slots of ``job_id`` (of ``profile`` only, when given)."""
        return sum(1 for s in self.slots() if s.job_id == job_id
                   and (profile is None or s.resource_profile == profile))

    def missing_slots(self, job_id: JobID) -> int:
        return sum(self.missing_resources(job_id).values())

    def missing_resources(self, job_id: JobID) -> dict[ResourceProfile, int]:
        """Per profile: the slots ``job_id`` declared beyond its PENDING + ALLOCATED ones."""
        req = self._requirements.get(job_id)
        if req is None:
            return {}
        out = {}
        for profile, n in req.resources.items():
            missing = n - self.acquired_slots(job_id, profile)
            if missing > 0:
                out[profile] = missing
        return out

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
        if event.total_resource is not None and not event.total_resource.is_unknown:
            self._budgets[event.resource_id] = _Budget(
                event.total_resource, event.default_slots or event.number_of_slots or 1)
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
        self._budgets.pop(event.resource_id, None)
        self._used.pop(event.resource_id, None)
        self._free_count.pop(event.resource_id, None)
        self._free_heap.pop(event.resource_id, None)
        return self._check_requirements(event.cause_id)

    @_handle.register
    def _(self, event: SlotReportReceived) -> list[AllocateSlot]:
        slots = self._task_executors.get(event.resource_id)
        if slots is None:
            return []
        reported: set[int] = set()
        for status in event.slot_report.slots:
            if status.slot_id.resource_id != event.resource_id:
                continue
            number = status.slot_id.slot_number
            reported.add(number)
            dynamic = not status.resource_profile.is_unknown
            slot = slots.get(number)
            if slot is None:
                if dynamic and status.allocation_id is None:
                    continue  # a dynamic slot exists only while allocated
                slot = TaskManagerSlot(status.slot_id, resource_profile=status.resource_profile)
                slot.story.append(f"reported FREE cause={event.cause_id}")
                slots[number] = slot
                self._mark_free(slot)
            if event.slot_report.version < slot.version:
                slot.story.append(f"ignored a report of version {event.slot_report.version} "
                                  f"< {slot.version} cause={event.cause_id}")
                continue  # built before the allocation we know of, and overtaken by its answer
            self._reconcile(slot, status.allocation_id, status.job_id, event.cause_id)
            if slot.state is SlotState.ALLOCATED:
                slot.version = max(slot.version, event.slot_report.version)
        for slot in [s for n, s in slots.items() if s.is_dynamic and n not in reported]:
            # freed on the TaskExecutor (PENDING stays: the report may predate our request)
            if slot.state is SlotState.ALLOCATED and event.slot_report.version >= slot.version:
                self._transition(slot, SlotState.FREE, None, None,
                                 f"not in the slot report cause={event.cause_id}")
        return self._check_requirements(event.cause_id)

    @_handle.register
    def _(self, event: RequirementsDeclared) -> list[AllocateSlot]:
        resources = event.requirement()
        if any(n < 0 for n in resources.values()) or event.number_of_slots < 0:
            raise ValueError(f"negative slot requirement {resources} of {event.job_id}")
        self._requirements[event.job_id] = _JobRequirement(
            event.job_master_address, {p: n for p, n in resources.items() if n})
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

    def _slot_of(self, event: SlotAllocationEvent) -> TaskManagerSlot | None:
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
            if slot.is_dynamic:  # removed by the transition: it comes back with the new owner
                self._task_executors[slot.resource_id][slot.slot_id.slot_number] = slot
                self._free_count[slot.resource_id] = self._free_count.get(slot.resource_id, 0) + 1
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
        budget = self._budgets.get(slot.resource_id)
        if budget is not None and was_free != (target is SlotState.FREE):
            used = self._used.get(slot.resource_id, ResourceProfile.ZERO)
            size = self._size(slot, budget)
            self._used[slot.resource_id] = used.merge(size) if was_free else used.subtract(size)
        if target is SlotState.FREE and not was_free:
            if slot.is_dynamic:  # a dynamic slot exists only while it is held
                self._task_executors.get(slot.resource_id, {}).pop(slot.slot_id.slot_number, None)
            else:
                self._mark_free(slot)
        elif was_free and target is not SlotState.FREE:
            self._free_count[slot.resource_id] -= 1

    def _mark_free(self, slot: TaskManagerSlot) -> None:
        rid = slot.resource_id
        self._free_count[rid] = self._free_count.get(rid, 0) + 1
        if not slot.is_dynamic:
            heapq.heappush(self._free_heap.setdefault(rid, []), slot.slot_id.slot_number)

    def _size(self, slot: TaskManagerSlot, budget: _Budget) -> ResourceProfile:
        return budget.default_slot if slot.resource_profile.is_unknown else slot.resource_profile

    def _fits(self, rid: ResourceID, size: ResourceProfile | None) -> bool:
        """Whether a slot of ``size`` (None: a default slot) fits ``rid``'s budget."""
        budget = self._budgets.get(rid)
        if budget is None:
            return size is None  # unknown totals take default slots only
        available = self.available_resource(rid)
        assert available is not None
        return (size or budget.default_slot).fits(available, budget.memory_accounted)

    def _usable_free(self, rid: ResourceID) -> int:
        free = self._free_count.get(rid, 0)
        budget = self._budgets.get(rid)
        if not free or budget is None:
            return free
        available = self.available_resource(rid)
        assert available is not None
        default = budget.default_slot
        usable = 0
        while usable < free and default.fits(available, budget.memory_accounted):
            usable += 1
            available = available.subtract(default)
        return usable

    def _check_requirements(self, cause_id: str) -> list[AllocateSlot]:
        commands: list[AllocateSlot] = []
        for job_id, requirement in self._requirements.items():
            for profile, missing in self.missing_resources(job_id).items():
                for _ in range(missing):
                    slot = (self._pick_free_slot() if profile.is_unknown
                            else self._new_dynamic_slot(profile))
                    if slot is None:
                        break
                    allocation_id = AllocationID.generate()
                    self._transition(slot, SlotState.PENDING, job_id, allocation_id,
                                     f"requested cause={cause_id}")
                    commands.append(AllocateSlot(slot.slot_id, job_id, allocation_id,
                                                 requirement.job_master_address, cause_id,
                                                 slot.resource_profile))
        return commands

    def _new_dynamic_slot(self, profile: ResourceProfile) -> TaskManagerSlot | None:
        """A FREE dynamic slot of ``profile`` on the TaskExecutor with the lowest share of its CPU
        in use that has room for it (created in the tracker; it becomes PENDING at once)."""
        best: tuple[float, int] | None = None
        best_rid: ResourceID | None = None
        for order, (rid, budget) in enumerate(self._budgets.items()):
            if rid in self.blocked or not self._task_executors.get(rid) \
                    or not self._fits(rid, profile):
                continue  # no slot report yet (an allocation could cross it), blocked, or full
            available = self.available_resource(rid)
            assert available is not None
            used = 1.0 - available.cpu_cores / budget.total.cpu_cores if budget.total.cpu_cores else 0.0
            if best is None or (used, order) < best:
                best, best_rid = (used, order), rid
        if best_rid is None:
            return None
        slots = self._task_executors[best_rid]
        number = max(self._budgets[best_rid].default_slots, max(slots, default=-1) + 1)
        slot = TaskManagerSlot(SlotID(best_rid, number), resource_profile=profile)
        slot.story.append("created FREE for a dynamic slot request")
        slots[number] = slot
        self._free_count[best_rid] = self._free_count.get(best_rid, 0) + 1
        return slot

    def _pick_free_slot(self) -> TaskManagerSlot | None:
        """A FREE default slot of the TaskExecutor with the lowest share of used slots (SLOTS
        mode) whose budget has room for it; within it the lowest slot number."""
        best: tuple[float, int, int] | None = None
        best_rid: ResourceID | None = None
        for order, (rid, slots) in enumerate(self._task_executors.items()):
            free = self._free_count.get(rid, 0)
            if not free or rid in self.blocked or not self._fits(rid, None):
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
                    assert not slot.is_dynamic, f"{where}: a FREE dynamic slot"
                else:
                    assert slot.job_id is not None and slot.allocation_id is not None, where
                    assert slot.allocation_id not in seen, \
                        f"{where}: allocation also on {seen.get(slot.allocation_id)}"
                    seen[slot.allocation_id] = slot.slot_id
            budget = self._budgets.get(resource_id)
            if budget is not None:
                used = ResourceProfile.ZERO
                for slot in slots.values():
                    if slot.state is not SlotState.FREE:
                        used = used.merge(self._size(slot, budget))
                assert used.fits(budget.total, budget.memory_accounted), \
                    f"{resource_id}: slots hold {used}, more than its {budget.total}"
                assert used == self._used.get(resource_id, ResourceProfile.ZERO), \
                    f"{resource_id}: used {self._used.get(resource_id)} != {used}"
        for job_id, requirement in self._requirements.items():
            assert all(n > 0 for n in requirement.resources.values()), \
                f"job {job_id}: non-positive requirement"
        for resource_id, slots in self._task_executors.items():
            free = {n for n, slot in slots.items() if slot.state is SlotState.FREE}
            assert self._free_count.get(resource_id, 0) == len(free), f"{resource_id}: free count"
            assert free <= set(self._free_heap.get(resource_id, ())), f"{resource_id}: free heap"
