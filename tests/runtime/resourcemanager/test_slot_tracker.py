from __future__ import annotations

from collections.abc import Iterator

import pytest

from flintlock.runtime.ids import AllocationID, JobID, ResourceID, SlotID
from flintlock.runtime.jobgraph.types import IllegalStateTransition
from flintlock.runtime.resourcemanager.slotmanager.slot_tracker import (
    ALLOWED_SLOT_TRANSITIONS,
    AllocateSlot,
    BlockedTaskExecutorsChanged,
    JobRequirementsRemoved,
    RequirementsCheck,
    RequirementsDeclared,
    SlotFreed,
    SlotReportReceived,
    SlotRequestAcknowledged,
    SlotRequestFailed,
    SlotState,
    SlotTracker,
    TaskExecutorAdded,
    TaskExecutorRemoved,
)
from flintlock.runtime.taskexecutor.gateway import SlotReport, SlotStatus

TE1 = ResourceID("te-1")
TE2 = ResourceID("te-2")
JOB = JobID.generate()
JM = "inproc://jobmaster"


@pytest.fixture
def tracker() -> Iterator[SlotTracker]:
    t = SlotTracker(validate=True)
    yield t
    t.validate()


def _states(t: SlotTracker) -> dict[str, str]:
    return {str(s.slot_id): s.state.value for s in t.slots()}


def test_requirement_allocates_free_slots_spread_over_task_executors(tracker: SlotTracker) -> None:
    assert tracker.handle(TaskExecutorAdded(TE1, 2)) == []
    assert tracker.handle(TaskExecutorAdded(TE2, 2)) == []
    commands = tracker.handle(RequirementsDeclared(JOB, JM, 2, cause_id="c1"))
    assert [c.slot_id for c in commands] == [SlotID(TE1, 0), SlotID(TE2, 0)]
    assert all(isinstance(c, AllocateSlot) and c.job_id == JOB and c.job_master_address == JM
               and c.cause_id == "c1" for c in commands)
    assert len({c.allocation_id for c in commands}) == 2
    assert tracker.acquired_slots(JOB) == 2 and tracker.missing_slots(JOB) == 0
    # declaring the same number again requests nothing more
    assert tracker.handle(RequirementsDeclared(JOB, JM, 2)) == []
    # more: the remaining free slots, again one per TaskExecutor
    more = tracker.handle(RequirementsDeclared(JOB, JM, 4))
    assert sorted(str(c.slot_id) for c in more) == sorted([str(SlotID(TE1, 1)), str(SlotID(TE2, 1))])


def test_ack_allocates_and_failure_frees_without_immediate_retry(tracker: SlotTracker) -> None:
    tracker.handle(TaskExecutorAdded(TE1, 1))
    [cmd] = tracker.handle(RequirementsDeclared(JOB, JM, 1))
    assert tracker.slot(cmd.slot_id).state is SlotState.PENDING  # type: ignore[union-attr]
    assert tracker.handle(SlotRequestFailed(cmd.slot_id, cmd.allocation_id, "boom")) == []
    assert tracker.slot(cmd.slot_id).state is SlotState.FREE  # type: ignore[union-attr]
    [retry] = tracker.handle(RequirementsCheck())
    assert retry.slot_id == cmd.slot_id and retry.allocation_id != cmd.allocation_id
    # a late answer for the old allocation changes nothing
    tracker.handle(SlotRequestAcknowledged(cmd.slot_id, cmd.allocation_id))
    assert tracker.slot(cmd.slot_id).state is SlotState.PENDING  # type: ignore[union-attr]
    tracker.handle(SlotRequestAcknowledged(retry.slot_id, retry.allocation_id))
    slot = tracker.slot(cmd.slot_id)
    assert slot is not None and slot.state is SlotState.ALLOCATED
    assert slot.allocation_id == retry.allocation_id and slot.job_id == JOB
    assert "PENDING -> FREE" in tracker.story(cmd.slot_id)


def test_lower_requirement_frees_nothing_and_freed_slot_is_not_reallocated(tracker: SlotTracker) -> None:
    tracker.handle(TaskExecutorAdded(TE1, 2))
    cmds = tracker.handle(RequirementsDeclared(JOB, JM, 2))
    for c in cmds:
        tracker.handle(SlotRequestAcknowledged(c.slot_id, c.allocation_id))
    assert tracker.handle(RequirementsDeclared(JOB, JM, 1)) == []
    assert tracker.number_of_free_slots() == 0
    # the JobMaster frees one through its TaskExecutor: it stays free (requirement is 1)
    assert tracker.handle(SlotFreed(cmds[0].slot_id, cmds[0].allocation_id)) == []
    assert tracker.number_of_free_slots() == 1
    # removing the job's requirements requests nothing
    assert tracker.handle(JobRequirementsRemoved(JOB)) == []
    assert tracker.jobs() == []


def test_slot_report_reconciles_free_and_allocated_slots(tracker: SlotTracker) -> None:
    tracker.handle(TaskExecutorAdded(TE1, 3))
    other_job, alloc = JobID.generate(), AllocationID.generate()
    [pending] = tracker.handle(RequirementsDeclared(JOB, JM, 1))
    report = SlotReport((
        SlotStatus(SlotID(TE1, 0)),  # slot 0 is PENDING: report may predate request -> stays
        SlotStatus(SlotID(TE1, 1), alloc, other_job),  # unknown allocation -> ALLOCATED
        SlotStatus(SlotID(TE1, 2)),
    ))
    assert pending.slot_id == SlotID(TE1, 0)
    tracker.handle(SlotReportReceived(TE1, report))
    assert _states(tracker) == {f"{TE1}_0": "PENDING", f"{TE1}_1": "ALLOCATED",
                                f"{TE1}_2": "FREE"}
    assert tracker.slot(SlotID(TE1, 1)).job_id == other_job  # type: ignore[union-attr]
    # report confirms the pending allocation, and frees slot 1
    report2 = SlotReport((
        SlotStatus(SlotID(TE1, 0), pending.allocation_id, JOB),
        SlotStatus(SlotID(TE1, 1)),
        SlotStatus(SlotID(TE1, 2)),
    ))
    tracker.handle(SlotReportReceived(TE1, report2))
    assert _states(tracker) == {f"{TE1}_0": "ALLOCATED", f"{TE1}_1": "FREE", f"{TE1}_2": "FREE"}


def _report(version: int, *allocations: tuple[AllocationID, JobID] | None) -> SlotReport:
    return SlotReport(tuple(SlotStatus(SlotID(TE1, i), *(a or (None, None)))
                            for i, a in enumerate(allocations)), version)


def test_a_report_overtaken_by_the_request_answer_frees_nothing(tracker: SlotTracker) -> None:
    """The TaskExecutor built a heartbeat's slot report (version 4, slot free), then allocated
    the slot (version 5) and answered; the answer arrived first. The report must not free the
    slot: the job would be offered a slot that is not free and the request retried until the
    next report (Flink keeps such allocations pending against reports)."""
    tracker.handle(TaskExecutorAdded(TE1, 0))
    tracker.handle(SlotReportReceived(TE1, _report(3, None, None)))
    [cmd] = tracker.handle(RequirementsDeclared(JOB, JM, 1))
    tracker.handle(SlotRequestAcknowledged(cmd.slot_id, cmd.allocation_id, version=5))
    assert tracker.handle(SlotReportReceived(TE1, _report(4, None, None))) == []
    assert _states(tracker) == {f"{TE1}_0": "ALLOCATED", f"{TE1}_1": "FREE"}
    assert "ignored a report of version 4 < 5" in tracker.story(cmd.slot_id)
    # a newer report that still shows it free: it was freed (the notification got lost)
    [again] = tracker.handle(SlotReportReceived(TE1, _report(6, None, None)))
    assert again.allocation_id != cmd.allocation_id and tracker.missing_slots(JOB) == 0


def test_a_report_older_than_a_free_does_not_bring_the_allocation_back(tracker: SlotTracker) -> None:
    tracker.handle(TaskExecutorAdded(TE1, 0))
    tracker.handle(SlotReportReceived(TE1, _report(0, None)))
    [cmd] = tracker.handle(RequirementsDeclared(JOB, JM, 1))
    tracker.handle(SlotRequestAcknowledged(cmd.slot_id, cmd.allocation_id, version=1))
    tracker.handle(JobRequirementsRemoved(JOB))
    tracker.handle(SlotFreed(cmd.slot_id, cmd.allocation_id, version=2))
    # a report built while the slot was still allocated (version 1) arrives after the free
    tracker.handle(SlotReportReceived(TE1, _report(1, (cmd.allocation_id, JOB))))
    assert _states(tracker) == {f"{TE1}_0": "FREE"}
    # reports at or after the known version still reconcile (an allocation made elsewhere)
    other, alloc = JobID.generate(), AllocationID.generate()
    tracker.handle(SlotReportReceived(TE1, _report(3, (alloc, other))))
    slot = tracker.slot(SlotID(TE1, 0))
    assert slot is not None and (slot.state, slot.job_id, slot.version) == (
        SlotState.ALLOCATED, other, 3)


def test_removed_task_executor_loses_its_slots_and_requirement_moves_elsewhere(
        tracker: SlotTracker) -> None:
    tracker.handle(TaskExecutorAdded(TE1, 1))
    [cmd] = tracker.handle(RequirementsDeclared(JOB, JM, 1))
    tracker.handle(SlotRequestAcknowledged(cmd.slot_id, cmd.allocation_id))
    assert tracker.handle(TaskExecutorRemoved(TE1)) == []  # nothing else is free
    assert tracker.number_of_slots() == 0 and tracker.missing_slots(JOB) == 1
    [again] = tracker.handle(TaskExecutorAdded(TE2, 1))
    assert again.slot_id == SlotID(TE2, 0)
    # answers about the removed TaskExecutor's slot are ignored
    assert tracker.handle(SlotFreed(cmd.slot_id, cmd.allocation_id)) == []


def test_requirements_of_several_jobs_are_served_from_the_same_pool(tracker: SlotTracker) -> None:
    job2 = JobID.generate()
    tracker.handle(TaskExecutorAdded(TE1, 2))
    assert len(tracker.handle(RequirementsDeclared(JOB, JM, 1))) == 1
    assert len(tracker.handle(RequirementsDeclared(job2, "inproc://jm2", 5))) == 1
    assert tracker.missing_slots(job2) == 4


def test_illegal_transition_raises_with_story() -> None:
    assert SlotState.PENDING not in ALLOWED_SLOT_TRANSITIONS[SlotState.ALLOCATED]
    t = SlotTracker()
    t.handle(TaskExecutorAdded(TE1, 1))
    slot = t.slot(SlotID(TE1, 0))
    assert slot is not None
    with pytest.raises(IllegalStateTransition, match="FREE -> SlotState.FREE|illegal"):
        t._transition(slot, SlotState.FREE, None, None, "test")


def test_validate_detects_a_duplicate_allocation() -> None:
    t = SlotTracker()
    t.handle(TaskExecutorAdded(TE1, 2))
    alloc = AllocationID.generate()
    for n in (0, 1):
        slot = t.slot(SlotID(TE1, n))
        assert slot is not None
        slot.state, slot.job_id, slot.allocation_id = SlotState.ALLOCATED, JOB, alloc
    with pytest.raises(AssertionError, match="allocation also on"):
        t.validate()


def test_negative_requirement_is_rejected(tracker: SlotTracker) -> None:
    with pytest.raises(ValueError, match="negative"):
        tracker.handle(RequirementsDeclared(JOB, JM, -1))


def test_blocked_task_executors_get_no_new_allocations(tracker: SlotTracker) -> None:
    """Speculative execution blocks slow nodes: their free slots go to no job until unblocked."""
    tracker.handle(TaskExecutorAdded(TE1, 2))
    tracker.handle(TaskExecutorAdded(TE2, 1))
    assert tracker.handle(BlockedTaskExecutorsChanged(frozenset({TE1}))) == []
    commands = tracker.handle(RequirementsDeclared(JOB, JM, 2))
    assert [c.slot_id for c in commands] == [SlotID(TE2, 0)]  # one short: TE1 is blocked
    assert tracker.missing_slots(JOB) == 1
    assert tracker.number_of_free_and_blocked_slots() == 2
    [later] = tracker.handle(BlockedTaskExecutorsChanged(frozenset()))
    assert later.slot_id.resource_id == TE1 and tracker.missing_slots(JOB) == 0
