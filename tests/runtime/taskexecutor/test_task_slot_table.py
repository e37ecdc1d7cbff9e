from __future__ import annotations

from collections.abc import Iterator

import pytest

from flintlock.runtime.ids import (
    AllocationID,
    ExecutionAttemptID,
    ExecutionVertexID,
    JobID,
    JobVertexID,
    ResourceID,
    SlotID,
)
from flintlock.runtime.jobgraph.types import IllegalStateTransition
from flintlock.runtime.taskexecutor.exceptions import (
    SlotAllocationException,
    TaskSubmissionException,
)
from flintlock.runtime.taskexecutor.slot.task_slot_table import TaskSlotState, TaskSlotTable

JOB = JobID.generate()


def _attempt() -> ExecutionAttemptID:
    return ExecutionAttemptID.generate(ExecutionVertexID(JobVertexID.generate(), 0), 0)


@pytest.fixture
def table() -> Iterator[TaskSlotTable]:
    t = TaskSlotTable(2)
    yield t
    t.validate()


def test_allocate_is_idempotent_and_rejects_a_taken_slot(table: TaskSlotTable) -> None:
    a1, a2 = AllocationID.generate(), AllocationID.generate()
    assert table.allocate_slot(0, JOB, a1)
    assert not table.allocate_slot(0, JOB, a1)
    with pytest.raises(SlotAllocationException, match="ALLOCATED"):
        table.allocate_slot(0, JOB, a2)
    with pytest.raises(SlotAllocationException, match="already holds"):
        table.allocate_slot(1, JOB, a1)
    with pytest.raises(SlotAllocationException, match="no default slot"):
        table.allocate_slot(7, JOB, a2)
    assert table.slot(0).state is TaskSlotState.ALLOCATED
    assert table.number_of_free_slots() == 1


def test_tasks_need_an_active_slot_of_their_job(table: TaskSlotTable) -> None:
    alloc = AllocationID.generate()
    table.allocate_slot(1, JOB, alloc)
    attempt = _attempt()
    with pytest.raises(TaskSubmissionException, match="not ACTIVE"):
        table.add_task(alloc, JOB, attempt, "task")
    assert table.mark_slot_active(alloc)
    with pytest.raises(TaskSubmissionException, match="no slot allocated"):
        table.add_task(alloc, JobID.generate(), attempt, "task")
    table.add_task(alloc, JOB, attempt, "task")
    with pytest.raises(TaskSubmissionException, match="already exists"):
        table.add_task(alloc, JOB, attempt, "task")
    assert table.task(attempt) == "task" and table.number_of_tasks() == 1
    assert table.remove_task(attempt) == ("task", None, None)  # ACTIVE slot stays allocated
    assert table.slot(1).state is TaskSlotState.ACTIVE


def test_free_slot_with_tasks_releases_after_the_last_task(table: TaskSlotTable) -> None:
    alloc = AllocationID.generate()
    table.allocate_slot(0, JOB, alloc)
    table.mark_slot_active(alloc)
    t1, t2 = _attempt(), _attempt()
    table.add_task(alloc, JOB, t1, "t1")
    table.add_task(alloc, JOB, t2, "t2")
    slot, tasks = table.free_slot(alloc, "test")
    assert slot is not None and slot.state is TaskSlotState.RELEASING
    assert sorted(tasks) == ["t1", "t2"]
    report = table.create_slot_report(ResourceID("te"))
    assert report.slots[0].allocation_id == alloc  # RELEASING still counts as allocated
    with pytest.raises(TaskSubmissionException):
        table.add_task(alloc, JOB, _attempt(), "t3")
    assert table.remove_task(t1) == ("t1", None, None)
    task, freed, freed_alloc = table.remove_task(t2)
    assert task == "t2" and freed is table.slot(0) and freed_alloc == alloc
    assert table.slot(0).state is TaskSlotState.FREE
    assert table.slot_by_allocation(alloc) is None
    assert "ACTIVE -> RELEASING" in table.story(0)


def test_free_slot_without_tasks_is_immediate_and_slot_report_lists_all(table: TaskSlotTable) -> None:
    alloc = AllocationID.generate()
    table.allocate_slot(1, JOB, alloc)
    rid = ResourceID("te")
    assert [(s.slot_id, s.allocation_id, s.job_id) for s in table.create_slot_report(rid).slots] \
        == [(SlotID(rid, 0), None, None), (SlotID(rid, 1), alloc, JOB)]
    slot, tasks = table.free_slot(alloc)
    assert slot is not None and slot.state is TaskSlotState.FREE and tasks == []
    assert table.free_slot(alloc) == (None, [])
    assert table.create_slot_report(rid).free_slots() == 2


def test_inactive_and_illegal_transitions(table: TaskSlotTable) -> None:
    alloc = AllocationID.generate()
    table.allocate_slot(0, JOB, alloc)
    assert table.mark_slot_active(alloc) and not table.mark_slot_active(alloc)
    assert table.mark_slot_inactive(alloc)
    assert table.slot(0).state is TaskSlotState.ALLOCATED
    with pytest.raises(IllegalStateTransition):
        table._transition(table.slot(1), TaskSlotState.ACTIVE, "test")
