"""Fine-grained resources (layer 1, pure cores): ResourceProfile arithmetic, the TaskExecutor's
slot budget, the ResourceManager's dynamic slots, the JobMaster's profile-matching slot pool and
workers sized for slots of a known profile (Flink ``ResourceProfile``, ``TaskSlotTableImpl``,
``FineGrainedSlotManager``, ``DefaultDeclarativeSlotPool``)."""

from __future__ import annotations

import pytest

from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.ids import AllocationID, JobID, ResourceID, SlotID
from flintlock.runtime.jobmaster.slotpool.declarative_slot_pool import DeclarativeSlotPool
from flintlock.runtime.resourcemanager.active.worker_tracker import (
    ResourcesChecked,
    StartWorker,
    WorkerRegistered,
    WorkerResourceSpec,
    WorkerSettings,
    WorkerTracker,
)
from flintlock.runtime.resourcemanager.slotmanager.slot_tracker import (
    RequirementsDeclared,
    SlotFreed,
    SlotReportReceived,
    SlotRequestAcknowledged,
    SlotState,
    SlotTracker,
    TaskExecutorAdded,
)
from flintlock.runtime.spark.jvm_status import SPARK_RESERVED_MEMORY, driver_memory_for
from flintlock.runtime.taskexecutor.exceptions import SlotAllocationException
from flintlock.runtime.taskexecutor.gateway import SlotOffer, SlotReport, SlotStatus
from flintlock.runtime.taskexecutor.slot.task_slot_table import TaskSlotState, TaskSlotTable

MIB = 1024 * 1024
UNKNOWN = ResourceProfile.UNKNOWN
HALF = ResourceProfile.of(0.5, 100)
ONE = ResourceProfile.of(1.0, 200)
TM_TOTAL = ResourceProfile.of(2.0, 400, 0, 600)
JOB = JobID.generate()
JM = "inproc://jobmaster"
TE1, TE2 = ResourceID("te-1"), ResourceID("te-2")


# ---- ResourceProfile ------------------------------------------------------------------------------


def test_profiles_add_subtract_divide_and_fit() -> None:
    assert HALF.merge(HALF) == ResourceProfile.of(1.0, 200)
    assert TM_TOTAL.subtract(ONE) == ResourceProfile.of(1.0, 200, 0, 600)
    assert TM_TOTAL.divide(2) == ResourceProfile.of(1.0, 200, 0, 300)
    # 0.1 + 0.2 cores fit into 0.3 (compared at 1e-6 cores, as Flink's BigDecimal)
    assert ResourceProfile(0.1).merge(ResourceProfile(0.2)).fits(ResourceProfile(0.3))
    assert ONE.fits(TM_TOTAL) and not ResourceProfile.of(2.5).fits(TM_TOTAL)
    big_heap = ResourceProfile.of(1.0, 1000)
    assert not big_heap.fits(TM_TOTAL)
    assert big_heap.fits(TM_TOTAL, memory_accounted=False)  # a TaskManager of unknown memory
    assert ResourceProfile.of(1.0).subtract(ResourceProfile.of(2.0)) == ResourceProfile.ZERO


def test_unknown_profiles_cannot_be_added_or_compared_and_bad_amounts_are_refused() -> None:
    with pytest.raises(ValueError, match="UNKNOWN"):
        UNKNOWN.merge(ONE)
    with pytest.raises(ValueError, match="UNKNOWN"):
        ONE.fits(UNKNOWN)
    with pytest.raises(ValueError, match="CPU cores"):
        ResourceProfile(-1.0)
    with pytest.raises(ValueError, match="task_heap_memory"):
        ResourceProfile(1.0, -5)
    assert str(UNKNOWN) == "ResourceProfile{UNKNOWN}"
    assert str(ResourceProfile.of(0.5, 100)) == "ResourceProfile{cpuCores=0.5, taskHeapMemory=100mb}"


def test_driver_memory_is_the_inverse_of_the_spark_memory_split() -> None:
    heap = driver_memory_for(task_heap=400 * MIB, managed=300 * MIB, fraction=0.6)
    usable = heap / 1.15 - SPARK_RESERVED_MEMORY
    assert usable * 0.4 >= 400 * MIB - 1 and usable * 0.6 >= 300 * MIB
    assert driver_memory_for(0, 0) > SPARK_RESERVED_MEMORY
    with pytest.raises(ValueError, match="fraction"):
        driver_memory_for(1, 1, fraction=1.0)


# ---- TaskSlotTable: the TaskExecutor's budget --------------------------------------------------


def test_task_slot_table_allocates_dynamic_slots_within_its_total() -> None:
    table = TaskSlotTable(2, TM_TOTAL)
    assert table.default_slot_resource == ResourceProfile.of(1.0, 200, 0, 300)
    a, b, c = AllocationID.generate(), AllocationID.generate(), AllocationID.generate()
    assert table.allocate_slot(2, JOB, a, ONE)
    assert table.slot(2).resource_profile == ONE and table.slot(2).state is TaskSlotState.ALLOCATED
    assert table.allocate_slot(3, JOB, b, HALF)
    # 0.5 cores left: a default slot (1 core) no longer fits, another half does
    with pytest.raises(SlotAllocationException, match="only .* is left"):
        table.allocate_slot(0, JOB, c)
    with pytest.raises(SlotAllocationException, match="no dynamic slot"):
        table.allocate_slot(1, JOB, c, HALF)  # a dynamic slot needs an index >= 2
    assert table.allocate_slot(4, JOB, c, HALF)
    report = table.create_slot_report(TE1)
    assert [(s.slot_id.slot_number, s.resource_profile) for s in report.slots] == [
        (0, UNKNOWN), (1, UNKNOWN), (2, ONE), (3, HALF), (4, HALF)]
    table.free_slot(a)
    assert [s.index for s in table.slots()] == [0, 1, 3, 4]  # a dynamic slot ends when freed
    assert table.allocate_slot(0, JOB, AllocationID.generate())  # the freed core takes it
    table.validate()


def test_task_slot_table_without_a_known_total_takes_default_slots_only() -> None:
    table = TaskSlotTable(1)
    assert table.allocate_slot(0, JOB, AllocationID.generate())
    with pytest.raises(SlotAllocationException, match="not known"):
        table.allocate_slot(1, JOB, AllocationID.generate(), HALF)


# ---- SlotTracker: the ResourceManager's dynamic slots -----------------------------------------


@pytest.fixture
def tracker() -> SlotTracker:
    return SlotTracker(validate=True)


def _register(tracker: SlotTracker, rid: ResourceID, total: ResourceProfile | None = TM_TOTAL,
              slots: int = 2) -> None:
    tracker.handle(TaskExecutorAdded(rid, 0, total_resource=total, default_slots=slots))
    tracker.handle(SlotReportReceived(rid, SlotReport(tuple(
        SlotStatus(SlotID(rid, i)) for i in range(slots)))))


def test_slots_of_a_profile_are_dynamic_and_spread_by_cpu_in_use(tracker: SlotTracker) -> None:
    _register(tracker, TE1)
    _register(tracker, TE2)
    commands = tracker.handle(RequirementsDeclared(JOB, JM, 0, resources=((ONE, 3),)))
    assert [(c.slot_id.resource_id, c.slot_id.slot_number, c.resource_profile)
            for c in commands] == [(TE1, 2, ONE), (TE2, 2, ONE), (TE1, 3, ONE)]
    assert tracker.missing_resources(JOB) == {}
    assert tracker.available_resource(TE1) == ResourceProfile.of(0.0, 0, 0, 600)
    # TE1's budget is spent: its two FREE default slots cannot be used
    assert tracker.number_of_free_slots(TE1) == 0 and tracker.number_of_free_slots(TE2) == 2 - 1


def test_no_dynamic_slot_before_the_task_executors_first_slot_report(tracker: SlotTracker) -> None:
    tracker.handle(TaskExecutorAdded(TE1, 0, total_resource=TM_TOTAL, default_slots=2))
    assert tracker.handle(RequirementsDeclared(JOB, JM, 0, resources=((ONE, 1),))) == []
    (command,) = tracker.handle(SlotReportReceived(TE1, SlotReport(
        (SlotStatus(SlotID(TE1, 0)), SlotStatus(SlotID(TE1, 1))))))
    assert command.slot_id == SlotID(TE1, 2) and command.resource_profile == ONE


def test_a_profile_no_task_executor_can_hold_stays_missing(tracker: SlotTracker) -> None:
    _register(tracker, TE1)
    _register(tracker, TE2, total=None)  # unknown total: default slots only
    huge = ResourceProfile.of(4.0, 100)
    assert tracker.handle(RequirementsDeclared(JOB, JM, 0, resources=((huge, 1),))) == []
    assert tracker.missing_resources(JOB) == {huge: 1}
    # default and known profiles together: each served from its own kind of slot
    commands = tracker.handle(RequirementsDeclared(JOB, JM, 0, resources=((UNKNOWN, 2), (HALF, 1))))
    assert sorted((str(c.slot_id), c.resource_profile.is_unknown) for c in commands) == sorted([
        (str(SlotID(TE1, 0)), True), (str(SlotID(TE2, 0)), True), (str(SlotID(TE1, 2)), False)])


def test_a_dynamic_slot_is_gone_when_freed_or_missing_from_a_newer_report(tracker: SlotTracker) -> None:
    _register(tracker, TE1)
    (c1, c2) = tracker.handle(RequirementsDeclared(JOB, JM, 0, resources=((ONE, 2),)))
    tracker.handle(SlotRequestAcknowledged(c1.slot_id, c1.allocation_id, version=1))
    tracker.handle(SlotRequestAcknowledged(c2.slot_id, c2.allocation_id, version=2))
    tracker.handle(RequirementsDeclared(JOB, JM, 0, resources=((ONE, 1),)))
    tracker.handle(SlotFreed(c1.slot_id, c1.allocation_id, version=3))
    assert tracker.slot(c1.slot_id) is None
    assert tracker.available_resource(TE1) == ResourceProfile.of(1.0, 200, 0, 600)
    # a report of version 4 without the other dynamic slot: it was freed too
    tracker.handle(SlotReportReceived(TE1, SlotReport(
        (SlotStatus(SlotID(TE1, 0)), SlotStatus(SlotID(TE1, 1))), version=4)))
    assert tracker.slot(c2.slot_id) is None
    # ... and the requirement of one ONE slot is served again, by a new dynamic slot
    (again,) = [s for s in tracker.slots(TE1) if s.is_dynamic]
    assert again.state is SlotState.PENDING and again.resource_profile == ONE


def test_a_reported_dynamic_slot_is_adopted_after_a_resource_manager_failover(tracker: SlotTracker) -> None:
    tracker.handle(TaskExecutorAdded(TE1, 0, total_resource=TM_TOTAL, default_slots=2))
    alloc = AllocationID.generate()
    tracker.handle(SlotReportReceived(TE1, SlotReport((
        SlotStatus(SlotID(TE1, 0)), SlotStatus(SlotID(TE1, 1)),
        SlotStatus(SlotID(TE1, 2), alloc, JOB, ONE)), version=7)))
    slot = tracker.slot(SlotID(TE1, 2))
    assert slot is not None and slot.state is SlotState.ALLOCATED and slot.resource_profile == ONE
    assert tracker.available_resource(TE1) == ResourceProfile.of(1.0, 200, 0, 600)


# ---- DeclarativeSlotPool: requests match slots of their profile ----------------------------------


def test_the_pool_matches_requests_to_slots_of_their_profile() -> None:
    pool = DeclarativeSlotPool()
    assert pool.request_slot(1, UNKNOWN) is None
    assert pool.request_slot(2, ONE) is None
    assert pool.required_resources() == tuple(sorted(((UNKNOWN, 1), (ONE, 1))))
    a_one, a_default, extra = (AllocationID.generate() for _ in range(3))
    accepted = pool.offer_slots(TE1, "inproc://te-1", (
        SlotOffer(a_one, 2, ONE), SlotOffer(extra, 3, ONE), SlotOffer(a_default, 0)), now=0.0)
    assert [o.allocation_id for o in accepted] == [a_one, a_default]  # one ONE slot is wanted
    assigned = dict(pool.assign_pending())
    assert assigned[1].allocation_id == a_default and assigned[2].allocation_id == a_one
    pool.release_slot(2, now=1.0)
    # a free ONE slot does not serve a default request
    assert pool.request_slot(3, UNKNOWN) is None
    assert pool.request_slot(4, ONE).allocation_id == a_one
    pool.validate()


# ---- WorkerTracker: workers sized for slots of a profile ------------------------------------------


def test_workers_are_started_sized_for_the_slots_no_registered_one_can_hold() -> None:
    tracker = WorkerTracker(WorkerSettings(spec=WorkerResourceSpec(2, 2)), "tm", validate=True)
    big = ResourceProfile.of(1.5, 700, 0, 100)
    (start,) = tracker.handle(ResourcesChecked(0, 0, True, {}, missing_resources={big: 1}))
    assert isinstance(start, StartWorker)
    assert start.spec == WorkerResourceSpec(1, 2, 700 * MIB, 0, 100 * MIB)
    # while it starts, it counts for that profile: no second one
    assert tracker.handle(ResourcesChecked(100, 0, True, {}, missing_resources={big: 1})) == []
    # two slots of half a core: one worker of the default's 2 cores holds four of them
    commands = tracker.handle(ResourcesChecked(200, 0, True, {}, missing_resources={big: 1, HALF: 5}))
    assert [c.spec for c in commands] == [WorkerResourceSpec.for_slots(HALF, 4)] * 2
    tracker.handle(WorkerRegistered(start.resource_id, 300))
    assert tracker.handle(ResourcesChecked(400, 0, True, {start.resource_id: (1, 0)})) == []
