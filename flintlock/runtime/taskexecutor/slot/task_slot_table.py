"""TaskSlotTable: a TaskExecutor's slots, what they are allocated to, and the tasks in them.

Follows Flink ``taskexecutor/slot/{TaskSlotTable,TaskSlot,TaskSlotState}``. Pure bookkeeping: it
runs in the TaskExecutor's mailbox, holds no locks, starts nothing and stores tasks as opaque
objects (the TaskExecutor starts and cancels them).

Fine-grained resources (Flink ``TaskSlotTableImpl`` with its ``ResourceBudgetManager``): the
table knows the TaskExecutor's total ``ResourceProfile``. Slots ``0..numberOfTaskSlots-1`` are
default slots of ``total / numberOfTaskSlots`` each; a request with a known profile creates a
*dynamic* slot at an index at or above that, which exists while it is allocated. Every
allocation must fit what the allocated slots leave of the total (memory only when the total's
memory is known).
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.ids import AllocationID, ExecutionAttemptID, JobID, ResourceID, SlotID
from flintlock.runtime.jobgraph.types import IllegalStateTransition
from flintlock.runtime.taskexecutor.exceptions import (
    SlotAllocationException,
    TaskSubmissionException,
)
from flintlock.runtime.taskexecutor.gateway import SlotReport, SlotStatus

__all__ = ["ALLOWED_TASK_SLOT_TRANSITIONS", "TaskSlot", "TaskSlotState", "TaskSlotTable"]

_STORY_LENGTH = 32


class TaskSlotState(enum.Enum):
    """State of a slot on its TaskExecutor (Flink ``TaskSlotState``).

    ::

        FREE --request_slot--> ALLOCATED --offer accepted--> ACTIVE
          ^                      |  ^                           |
          |   offer rejected /   |  +---- JobMaster lost -------+
          +-------- freed -------+                              |
          |                                                     v free_slot
          +------ last task gone ------------------------- RELEASING
        ALLOCATED --free_slot with tasks--> RELEASING (never: ALLOCATED slots run no tasks)
    """

    FREE = "FREE"  #: not allocated (Flink removes the TaskSlot object instead)
    ALLOCATED = "ALLOCATED"  #: allocated to a job, not yet accepted by its JobMaster
    ACTIVE = "ACTIVE"  #: accepted by the JobMaster; tasks may be submitted
    RELEASING = "RELEASING"  #: being freed; waits until its tasks are gone

    def is_terminal(self) -> bool:
        return False


ALLOWED_TASK_SLOT_TRANSITIONS: Mapping[TaskSlotState, frozenset[TaskSlotState]] = {
    TaskSlotState.FREE: frozenset({TaskSlotState.ALLOCATED}),
    TaskSlotState.ALLOCATED: frozenset({TaskSlotState.ACTIVE, TaskSlotState.FREE,
                                        TaskSlotState.RELEASING}),
    TaskSlotState.ACTIVE: frozenset({TaskSlotState.ALLOCATED, TaskSlotState.RELEASING,
                                     TaskSlotState.FREE}),
    TaskSlotState.RELEASING: frozenset({TaskSlotState.FREE}),
}


@dataclass
class TaskSlot:
    """One slot: its index, state, allocation and the tasks running in it."""

    index: int
    state: TaskSlotState = TaskSlotState.FREE
    job_id: JobID | None = None
    allocation_id: AllocationID | None = None
    tasks: dict[ExecutionAttemptID, Any] = field(default_factory=dict)
    story: deque[str] = field(default_factory=lambda: deque(maxlen=_STORY_LENGTH))
    #: the profile it was requested with (UNKNOWN: a default slot; known: a dynamic slot)
    resource_profile: ResourceProfile = ResourceProfile.UNKNOWN


class TaskSlotTable:
    """The slots of one TaskExecutor.

    Args:
        number_of_slots: ``taskmanager.numberOfTaskSlots``.
        total_resource: the TaskExecutor's total resources; None while unknown (then only
            default slots can be allocated, unchecked).
    """

    def __init__(self, number_of_slots: int, total_resource: ResourceProfile | None = None) -> None:
        if number_of_slots < 1:
            raise ValueError(f"a TaskExecutor needs at least one slot, got {number_of_slots}")
        self._slots = [TaskSlot(i) for i in range(number_of_slots)]
        #: dynamic slots (index >= number_of_slots) while they are allocated
        self._dynamic: dict[int, TaskSlot] = {}
        self.total_resource = total_resource
        self._by_allocation: dict[AllocationID, TaskSlot] = {}
        self._task_slots: dict[ExecutionAttemptID, TaskSlot] = {}
        #: bumped whenever a slot's allocation changes (``SlotReport.version``)
        self.version = 0

    # ---- queries -------------------------------------------------------------------------------

    @property
    def number_of_slots(self) -> int:
        return len(self._slots)

    def slot(self, index: int) -> TaskSlot:
        if index >= len(self._slots) and index in self._dynamic:
            return self._dynamic[index]
        return self._slots[index]

    def slots(self) -> list[TaskSlot]:
        return [*self._slots, *self._dynamic.values()]

    @property
    def default_slot_resource(self) -> ResourceProfile | None:
        """What one default slot holds (total / number of slots), None while unknown."""
        return None if self.total_resource is None else self.total_resource.divide(len(self._slots))

    def size_of(self, slot: TaskSlot) -> ResourceProfile | None:
        """The resources ``slot`` holds (None: a default slot of an unknown total)."""
        if not slot.resource_profile.is_unknown:
            return slot.resource_profile
        return self.default_slot_resource

    def available_resource(self) -> ResourceProfile | None:
        """The total minus what allocated slots hold; None while the total is unknown."""
        if self.total_resource is None:
            return None
        available = self.total_resource
        for slot in self.slots():
            size = self.size_of(slot)
            if slot.state is not TaskSlotState.FREE and size is not None:
                available = available.subtract(size)
        return available

    def slot_by_allocation(self, allocation_id: AllocationID) -> TaskSlot | None:
        return self._by_allocation.get(allocation_id)

    def is_allocated(self, index: int, job_id: JobID, allocation_id: AllocationID) -> bool:
        slot = self._dynamic.get(index) if index >= len(self._slots) else self._slots[index]
        return slot is not None and slot.allocation_id == allocation_id and slot.job_id == job_id

    def slots_of_job(self, job_id: JobID) -> list[TaskSlot]:
        return [s for s in self.slots() if s.job_id == job_id]

    def allocated_not_active(self, job_id: JobID) -> list[TaskSlot]:
        return [s for s in self.slots() if s.job_id == job_id and s.state is TaskSlotState.ALLOCATED]

    def jobs(self) -> set[JobID]:
        return {s.job_id for s in self.slots() if s.job_id is not None}

    def task(self, attempt_id: ExecutionAttemptID) -> Any | None:
        slot = self._task_slots.get(attempt_id)
        return slot.tasks[attempt_id] if slot else None

    def tasks(self, job_id: JobID | None = None) -> list[Any]:
        return [t for s in self.slots() for t in s.tasks.values()
                if job_id is None or s.job_id == job_id]

    def number_of_tasks(self) -> int:
        return len(self._task_slots)

    def number_of_free_slots(self) -> int:
        return sum(1 for s in self._slots if s.state is TaskSlotState.FREE)

    def create_slot_report(self, resource_id: ResourceID) -> SlotReport:
        """Every default slot, free or with its allocation, and every dynamic slot (RELEASING
        slots still count as allocated), as of ``version``."""
        return SlotReport(tuple(
            SlotStatus(SlotID(resource_id, s.index), s.allocation_id, s.job_id, s.resource_profile)
            for s in self.slots()
        ), self.version)

    def story(self, index: int) -> str:
        return "\n".join(self.slot(index).story)

    # ---- changes -------------------------------------------------------------------------------

    def allocate_slot(self, index: int, job_id: JobID, allocation_id: AllocationID,
                      resource_profile: ResourceProfile = ResourceProfile.UNKNOWN) -> bool:
        """Allocate slot ``index`` (a default slot for an UNKNOWN profile, else a dynamic slot
        of ``resource_profile`` at ``index >= number_of_slots``); True if newly allocated, False
        if it already was (idempotent).

        Raises:
            SlotAllocationException: unknown index, the slot or allocation id is taken, or the
                slot does not fit into what the allocated slots leave of the total.
        """
        dynamic = not resource_profile.is_unknown
        if dynamic and index < len(self._slots) or not dynamic and not 0 <= index < len(self._slots):
            kind = "dynamic slot (index >=" if dynamic else "default slot (index <"
            raise SlotAllocationException(
                f"no {kind} {len(self._slots)}) with index {index}")
        slot = self._dynamic.get(index) if dynamic else self._slots[index]
        if slot is None:
            slot = TaskSlot(index, resource_profile=resource_profile)
        if slot.allocation_id == allocation_id and slot.job_id == job_id:
            return False
        if slot.state is not TaskSlotState.FREE:
            raise SlotAllocationException(
                f"slot {index} is {slot.state.value} for allocation {slot.allocation_id} "
                f"of job {slot.job_id}"
            )
        if allocation_id in self._by_allocation:
            raise SlotAllocationException(
                f"allocation {allocation_id} already holds slot {self._by_allocation[allocation_id].index}"
            )
        self._check_budget(slot, dynamic)
        self._transition(slot, TaskSlotState.ALLOCATED, "request_slot", (job_id, allocation_id))
        self._by_allocation[allocation_id] = slot
        if dynamic:
            self._dynamic[index] = slot
        return True

    def _check_budget(self, slot: TaskSlot, dynamic: bool) -> None:
        available = self.available_resource()
        if available is None:
            if dynamic:
                raise SlotAllocationException(
                    f"cannot allocate a slot of {slot.resource_profile}: this TaskExecutor's "
                    "resources are not known")
            return
        size = self.size_of(slot)
        assert self.total_resource is not None and size is not None
        if not size.fits(available, memory_accounted=self.total_resource.task_heap_memory > 0):
            raise SlotAllocationException(
                f"slot {slot.index} needs {size}, but only {available} of this TaskExecutor's "
                f"{self.total_resource} is left")

    def mark_slot_active(self, allocation_id: AllocationID) -> bool:
        """ALLOCATED -> ACTIVE; True when it changed, False if it already was ACTIVE or unknown."""
        slot = self._by_allocation.get(allocation_id)
        if slot is None or slot.state is TaskSlotState.ACTIVE:
            return False
        self._transition(slot, TaskSlotState.ACTIVE, "offer accepted")
        return True

    def try_mark_slot_active(self, job_id: JobID, allocation_id: AllocationID) -> bool:
        """Flink ``tryMarkSlotActive``: True if the allocation's slot of ``job_id`` is ACTIVE
        (marking an ALLOCATED one active: a task for it proves the JobMaster accepted it)."""
        slot = self._by_allocation.get(allocation_id)
        if slot is None or slot.job_id != job_id:
            return False
        if slot.state is TaskSlotState.ALLOCATED:
            self._transition(slot, TaskSlotState.ACTIVE, "task submitted")
        return slot.state is TaskSlotState.ACTIVE

    def mark_slot_inactive(self, allocation_id: AllocationID) -> bool:
        slot = self._by_allocation.get(allocation_id)
        if slot is None or slot.state is not TaskSlotState.ACTIVE or slot.tasks:
            return False
        self._transition(slot, TaskSlotState.ALLOCATED, "marked inactive")
        return True

    def free_slot(self, allocation_id: AllocationID, cause: str = "") -> tuple[TaskSlot | None, list[Any]]:
        """Free the slot of ``allocation_id``.

        Returns:
            ``(slot, tasks)``: with no tasks left the slot is FREE at once (``slot`` is the freed
            slot, its index still valid); otherwise it is RELEASING and ``tasks`` must be stopped
            (the slot becomes FREE when the last one is removed). ``(None, [])`` if unknown.
        """
        slot = self._by_allocation.get(allocation_id)
        if slot is None:
            return None, []
        if slot.tasks:
            if slot.state is not TaskSlotState.RELEASING:
                self._transition(slot, TaskSlotState.RELEASING, f"free_slot: {cause}")
            return slot, list(slot.tasks.values())
        self._release(slot, f"free_slot: {cause}")
        return slot, []

    def add_task(self, allocation_id: AllocationID, job_id: JobID, attempt_id: ExecutionAttemptID,
                 task: Any) -> None:
        """Put a task into its ACTIVE slot.

        Raises:
            TaskSubmissionException: no ACTIVE slot for the allocation and job, or a duplicate.
        """
        slot = self._by_allocation.get(allocation_id)
        if slot is None or slot.job_id != job_id:
            raise TaskSubmissionException(
                f"no slot allocated for allocation {allocation_id} of job {job_id}"
            )
        if slot.state is not TaskSlotState.ACTIVE:
            raise TaskSubmissionException(
                f"slot {slot.index} of allocation {allocation_id} is {slot.state.value}, not ACTIVE"
            )
        if attempt_id in self._task_slots:
            raise TaskSubmissionException(f"task {attempt_id} already exists")
        slot.tasks[attempt_id] = task
        self._task_slots[attempt_id] = slot

    def remove_task(self, attempt_id: ExecutionAttemptID) -> tuple[Any | None, TaskSlot | None, AllocationID | None]:
        """Remove a finished task.

        Returns:
            ``(task, freed_slot, freed_allocation)``: ``freed_slot`` is set when removing it
            completed the release of a RELEASING slot.
        """
        slot = self._task_slots.pop(attempt_id, None)
        if slot is None:
            return None, None, None
        task = slot.tasks.pop(attempt_id)
        if slot.state is TaskSlotState.RELEASING and not slot.tasks:
            allocation_id = slot.allocation_id
            self._release(slot, "last task removed")
            return task, slot, allocation_id
        return task, None, None

    def _release(self, slot: TaskSlot, why: str) -> None:
        assert not slot.tasks
        if slot.allocation_id is not None:
            self._by_allocation.pop(slot.allocation_id, None)
        self._transition(slot, TaskSlotState.FREE, why, (None, None))
        if slot.index >= len(self._slots):
            del self._dynamic[slot.index]  # a dynamic slot exists only while allocated

    def _transition(self, slot: TaskSlot, target: TaskSlotState, why: str,
                    owner: tuple[JobID | None, AllocationID | None] | None = None) -> None:
        """Move ``slot`` to ``target``; ``owner`` (job, allocation) replaces the current one."""
        if target not in ALLOWED_TASK_SLOT_TRANSITIONS[slot.state]:
            raise IllegalStateTransition(f"TaskSlot {slot.index}", slot.state, target,
                                         "\n".join(slot.story))
        if owner is not None:
            if owner[1] != slot.allocation_id:
                self.version += 1
            slot.job_id, slot.allocation_id = owner
        slot.story.append(f"{slot.state.value} -> {target.value} job={slot.job_id} "
                          f"allocation={slot.allocation_id} ({why})")
        slot.state = target

    # ---- invariants ----------------------------------------------------------------------------

    def validate(self) -> None:
        """Check the invariants; raises AssertionError naming the broken one."""
        for index, slot in self._dynamic.items():
            assert index == slot.index >= len(self._slots), f"dynamic slot {index}: bad index"
            assert slot.state is not TaskSlotState.FREE, f"dynamic slot {index}: FREE"
            assert not slot.resource_profile.is_unknown, f"dynamic slot {index}: no profile"
        available = self.available_resource()
        if available is not None and self.total_resource is not None:
            used = self.total_resource.subtract(available)
            assert used.fits(self.total_resource), "slots exceed the total"
        for slot in self.slots():
            where = f"slot {slot.index} {slot.state.value} job={slot.job_id} " \
                    f"allocation={slot.allocation_id} tasks={len(slot.tasks)}"
            if slot.state is TaskSlotState.FREE:
                assert slot.job_id is None and slot.allocation_id is None, where
                assert not slot.tasks, where
            else:
                assert slot.job_id is not None and slot.allocation_id is not None, where
                assert self._by_allocation.get(slot.allocation_id) is slot, where
            if slot.state is TaskSlotState.ALLOCATED:
                assert not slot.tasks, f"{where}: tasks in a slot that is not ACTIVE"
            for attempt_id in slot.tasks:
                assert self._task_slots.get(attempt_id) is slot, where
        assert len(self._by_allocation) == sum(
            1 for s in self.slots() if s.state is not TaskSlotState.FREE
        ), "allocation index out of sync"
        assert len(self._task_slots) == sum(len(s.tasks) for s in self.slots()), \
            "task index out of sync"
