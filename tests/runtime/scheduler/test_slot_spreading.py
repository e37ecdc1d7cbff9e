"""Layer 1: a job's subtasks spread evenly over the TaskManagers its slots come from.

Found on TPC-H Q18 at parallelism 4 on 2 TaskManagers x 4 slots: the slots of the first
TaskManager to answer were offered first and each offer was matched at once, so both subtasks of
``lineitem`` (and of ``orders``) ran on one TaskManager's Spark server while the other idled
(jobs of 7-9 s against 5 s spread). The pool now picks the TaskManager with the lowest share of
the job's slots in use, and the scheduler matches offers once they serve every waiting request
or ``slot.request.max-interval`` after they arrived.
"""

from __future__ import annotations

from scheduler_driver import Driver, deploys, make_job

from flintlock.runtime.ids import AllocationID, ResourceID
from flintlock.runtime.jobmaster.slotpool.declarative_slot_pool import DeclarativeSlotPool
from flintlock.runtime.scheduler.messages import StartScheduling
from flintlock.runtime.taskexecutor.gateway import SlotOffer

TM_A, TM_B = ResourceID("tm-a"), ResourceID("tm-b")


def _offers(n: int) -> tuple[SlotOffer, ...]:
    return tuple(SlotOffer(AllocationID.generate(), i) for i in range(n))


def test_waiting_requests_get_slots_of_different_task_managers() -> None:
    pool = DeclarativeSlotPool()
    for request in (1, 2, 3):
        assert pool.request_slot(request) is None
    pool.offer_slots(TM_A, "inproc://tm-a", _offers(2), now=0.0)
    pool.offer_slots(TM_B, "inproc://tm-b", _offers(1), now=0.0)
    placed = {request: slot.resource_id for request, slot in pool.assign_pending()}
    assert placed == {1: TM_A, 2: TM_B, 3: TM_A}
    pool.validate()


def test_a_new_request_goes_to_the_task_manager_with_the_lowest_share_in_use() -> None:
    pool = DeclarativeSlotPool()
    for request in range(1, 6):
        pool.request_slot(request)
    pool.offer_slots(TM_A, "inproc://tm-a", _offers(3), now=0.0)
    pool.offer_slots(TM_B, "inproc://tm-b", _offers(2), now=0.0)
    placed = {request: slot.resource_id for request, slot in pool.assign_pending()}
    assert placed == {1: TM_A, 2: TM_B, 3: TM_A, 4: TM_B, 5: TM_A}
    pool.release_slot(1, now=1.0)
    pool.release_slot(4, now=1.0)  # A has 2 of 3 in use, B 1 of 2
    sixth = pool.request_slot(6)
    assert sixth is not None and sixth.resource_id == TM_B
    pool.validate()
    pool.remove_task_manager(TM_B)
    seventh = pool.request_slot(7)
    assert seventh is not None and seventh.resource_id == TM_A
    pool.validate()


def test_offers_are_matched_once_they_serve_every_waiting_request() -> None:
    d = Driver(make_job([("a", 2)], []), **{"slot.request.max-interval": "20 ms"})
    d.handle(StartScheduling())
    _, first = d.offer(1, tm=TM_A)
    assert deploys(first) == []  # the other TaskManager's slot may be on its way
    _, second = d.offer(1, tm=TM_B)
    assert sorted(c.task_executor_address for c in deploys(second)) == ["inproc://tm-a", "inproc://tm-b"]
    assert deploys(d.advance(0.02)) == []  # the timer finds nothing left to match


def test_offers_short_of_the_waiting_requests_are_matched_after_the_max_interval() -> None:
    d = Driver(make_job([("a", 3)], []), **{"slot.request.max-interval": "20 ms"})
    d.handle(StartScheduling())
    _, first = d.offer(2, tm=TM_A)
    assert deploys(first) == []
    assert deploys(d.advance(0.019)) == []
    matched = deploys(d.advance(0.001))
    assert [c.tdd.subtask_index for c in matched] == [0, 1]
    _, last = d.offer(1, tm=TM_B)  # a freed or late slot is matched at once when it serves all
    assert [(c.task_executor_address, c.tdd.subtask_index) for c in deploys(last)] == [("inproc://tm-b", 2)]
