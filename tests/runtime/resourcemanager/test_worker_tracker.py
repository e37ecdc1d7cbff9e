"""WorkerTracker: when the active ResourceManager starts and stops workers (pure core, layer 1)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from flintlock.runtime.ids import ResourceID
from flintlock.runtime.resourcemanager.active.worker_tracker import (
    CheckReleasable,
    ReleasableAnswered,
    ResourcesChecked,
    StartWorker,
    StopWorker,
    WorkerRegistered,
    WorkerResourceSpec,
    WorkerSettings,
    WorkerStartFailed,
    WorkerState,
    WorkerTerminated,
    WorkerTracker,
)

SPEC = WorkerResourceSpec(number_of_slots=2, cpu_cores=1)


def _tracker(**settings: object) -> WorkerTracker:
    return WorkerTracker(WorkerSettings(spec=SPEC, **settings), "tm", validate=True)  # type: ignore[arg-type]


def _check(tracker: WorkerTracker, now: int, missing: int = 0,
           slots: Mapping[ResourceID, tuple[int, int]] | None = None,
           has_requirements: bool | None = None) -> list[object]:
    slots = slots or {}
    if has_requirements is None:
        has_requirements = missing > 0 or any(f < s for s, f in slots.values())
    return list(tracker.handle(ResourcesChecked(now, missing, has_requirements, slots)))


def _rid(n: int) -> ResourceID:
    return ResourceID(f"tm-{n}")


def test_missing_slots_start_enough_workers_once() -> None:
    tracker = _tracker()
    assert _check(tracker, 0, missing=3) == [StartWorker(_rid(1), SPEC, ""),
                                             StartWorker(_rid(2), SPEC, "")]
    assert _check(tracker, 10, missing=3) == []  # both still starting cover the 3 slots
    assert _check(tracker, 20, missing=5) == [StartWorker(_rid(3), SPEC, "")]
    assert [w.state for w in tracker.workers()] == [WorkerState.REQUESTED] * 3


def test_free_slots_and_registered_workers_count_before_new_ones() -> None:
    tracker = _tracker()
    _check(tracker, 0, missing=2)
    tracker.handle(WorkerRegistered(_rid(1), 5))
    # the SlotManager allocated the new worker's slots: nothing missing any more
    assert _check(tracker, 6, missing=0, slots={_rid(1): (2, 0)}) == []
    # a user's TaskManager with a free slot is used before starting another
    assert _check(tracker, 7, missing=0, slots={_rid(1): (2, 0), ResourceID("user"): (1, 1)},
                  has_requirements=True) == []


def test_a_registered_worker_whose_slots_are_not_reported_yet_counts_as_starting() -> None:
    tracker = _tracker()
    _check(tracker, 0, missing=2)
    tracker.handle(WorkerRegistered(_rid(1), 5))
    assert _check(tracker, 6, missing=2, slots={_rid(1): (0, 0)}) == []


def test_max_slots_limits_the_workers_started() -> None:
    tracker = _tracker(max_slots=5)
    assert len(_check(tracker, 0, missing=10)) == 2  # 2 x 2 slots; a third would make 6
    assert "slotmanager.number-of-slots.max is 5" in tracker.held_back
    tracker.handle(WorkerRegistered(_rid(1), 1))
    tracker.handle(WorkerRegistered(_rid(2), 1))
    assert _check(tracker, 2, missing=6, slots={_rid(1): (2, 0), _rid(2): (2, 0)}) == []


def test_max_slots_counts_a_registered_worker_whose_slots_are_not_reported_yet() -> None:
    # found by the deployment-modes benchmark: TPC-H Q18 in application mode (3 slots wanted,
    # at most 2) started a second TaskManager the moment the first registered
    tracker = _tracker(max_slots=2)
    assert len(_check(tracker, 0, missing=3)) == 1
    tracker.handle(WorkerRegistered(_rid(1), 5))
    assert _check(tracker, 6, missing=3, slots={_rid(1): (0, 0)}) == []
    assert "slotmanager.number-of-slots.max is 2" in tracker.held_back
    assert _check(tracker, 7, missing=1, slots={_rid(1): (2, 0)}) == []


def test_redundant_workers_are_kept_while_jobs_run() -> None:
    tracker = _tracker(redundant=1, idle_timeout_ms=100)
    assert _check(tracker, 0, missing=2) == [StartWorker(_rid(1), SPEC, ""),
                                             StartWorker(_rid(2), SPEC, "")]
    for n in (1, 2):
        tracker.handle(WorkerRegistered(_rid(n), 1))
    busy_and_spare = {_rid(1): (2, 0), _rid(2): (2, 2)}
    assert _check(tracker, 10, slots=busy_and_spare) == []
    assert _check(tracker, 500, slots=busy_and_spare) == []  # the spare is not released
    # the job ends: nothing declares slots, so no spare is needed and both go after the timeout
    idle = {_rid(1): (2, 2), _rid(2): (2, 2)}
    assert _check(tracker, 600, slots=idle) == [CheckReleasable(_rid(2), "")]  # idle since 10
    assert _check(tracker, 700, slots=idle) == [CheckReleasable(_rid(1), "")]


def test_an_idle_worker_is_stopped_only_after_the_timeout_and_when_releasable() -> None:
    tracker = _tracker(idle_timeout_ms=1_000)
    _check(tracker, 0, missing=1)
    tracker.handle(WorkerRegistered(_rid(1), 100))
    assert _check(tracker, 200, slots={_rid(1): (2, 1)}) == []  # busy
    assert _check(tracker, 300, slots={_rid(1): (2, 2)}) == []  # idle from 300
    assert _check(tracker, 1_299, slots={_rid(1): (2, 2)}) == []
    assert _check(tracker, 1_300, slots={_rid(1): (2, 2)}) == [CheckReleasable(_rid(1), "")]
    assert _check(tracker, 1_400, slots={_rid(1): (2, 2)}) == []  # one question at a time
    # it holds partitions a job still reads: asked again a timeout later
    assert tracker.handle(ReleasableAnswered(_rid(1), False, 1_500)) == []
    assert _check(tracker, 2_499, slots={_rid(1): (2, 2)}) == []
    assert _check(tracker, 2_500, slots={_rid(1): (2, 2)}) == [CheckReleasable(_rid(1), "")]
    stop = tracker.handle(ReleasableAnswered(_rid(1), True, 2_600))
    assert stop == [StopWorker(_rid(1), "idle for 1 s (resourcemanager.taskmanager-timeout)", "")]
    assert tracker.worker(_rid(1)).state is WorkerState.RELEASING  # type: ignore[union-attr]
    tracker.handle(WorkerTerminated(_rid(1), "stopped", 2_700))
    assert tracker.workers() == [] and tracker.failures_in_last_minute(2_700) == 0


def test_a_worker_that_got_work_while_asked_is_kept() -> None:
    tracker = _tracker(idle_timeout_ms=0)
    _check(tracker, 0, missing=1)
    tracker.handle(WorkerRegistered(_rid(1), 1))
    assert _check(tracker, 2, slots={_rid(1): (2, 2)}) == [CheckReleasable(_rid(1), "")]
    _check(tracker, 3, missing=0, slots={_rid(1): (2, 1)})  # a job took a slot meanwhile
    assert tracker.handle(ReleasableAnswered(_rid(1), True, 4)) == []
    assert tracker.worker(_rid(1)).state is WorkerState.REGISTERED  # type: ignore[union-attr]


def test_user_task_managers_are_never_stopped() -> None:
    tracker = _tracker(idle_timeout_ms=0)
    assert _check(tracker, 0, slots={ResourceID("user"): (4, 4)}) == []
    assert _check(tracker, 10_000, slots={ResourceID("user"): (4, 4)}) == []


def test_a_worker_not_registered_in_time_is_stopped_and_counted_as_failure() -> None:
    tracker = _tracker(registration_timeout_ms=5_000)
    _check(tracker, 0, missing=1)
    assert _check(tracker, 4_999, missing=1) == []
    commands = _check(tracker, 5_000, missing=1)
    assert commands[0] == StopWorker(
        _rid(1), "did not register within 5 s (resourcemanager.taskmanager-registration.timeout)",
        "")
    assert commands[1:] == [StartWorker(_rid(2), SPEC, "")]  # replaced at once (rate not exceeded)
    assert tracker.failures_in_last_minute(5_000) == 1
    assert "did not register" in tracker.last_failure


def test_start_failures_above_the_rate_start_one_worker_per_retry_interval() -> None:
    tracker = _tracker(max_failure_rate=3, retry_interval_ms=3_000)
    now = 0
    for n in range(1, 3):  # four failures within a minute: the rate (3/min) is exceeded
        assert _check(tracker, now, missing=4) == [StartWorker(_rid(2 * n - 1), SPEC, ""),
                                                   StartWorker(_rid(2 * n), SPEC, "")]
        for rid in (_rid(2 * n - 1), _rid(2 * n)):
            tracker.handle(WorkerStartFailed(rid, "No such file: /bad/python", now))
        now += 100
    assert tracker.failures_in_last_minute(now) == 4
    assert _check(tracker, now, missing=4) == [StartWorker(_rid(5), SPEC, "")]  # one only
    tracker.handle(WorkerTerminated(_rid(5), "exited with code 1", now + 10))
    assert _check(tracker, now + 2_999, missing=4) == []
    assert "next start in" in tracker.held_back and "exited with code 1" in tracker.held_back
    assert _check(tracker, now + 3_000, missing=4) == [StartWorker(_rid(6), SPEC, "")]
    # a minute without failures: full speed again (the one still starting counts)
    assert _check(tracker, now + 70_000, missing=6) == [StartWorker(_rid(7), SPEC, ""),
                                                        StartWorker(_rid(8), SPEC, "")]
    assert tracker.failures_in_last_minute(now + 70_000) == 0


def test_a_registered_worker_that_ends_is_no_failure_and_gets_replaced_by_the_next_check() -> None:
    tracker = _tracker()
    _check(tracker, 0, missing=1)
    tracker.handle(WorkerRegistered(_rid(1), 1))
    tracker.handle(WorkerTerminated(_rid(1), "killed", 2))
    assert tracker.failures_in_last_minute(2) == 0
    assert _check(tracker, 3, missing=1) == [StartWorker(_rid(2), SPEC, "")]


def test_events_about_unknown_workers_are_ignored() -> None:
    tracker = _tracker()
    for event in (WorkerRegistered(_rid(9), 0), WorkerTerminated(_rid(9), "x", 0),
                  WorkerStartFailed(_rid(9), "x", 0), ReleasableAnswered(_rid(9), True, 0)):
        assert tracker.handle(event) == []
    assert tracker.failures_in_last_minute(0) == 0


def test_a_spec_needs_a_slot_and_a_core() -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        WorkerResourceSpec(number_of_slots=0, cpu_cores=1)


def test_initial_workers_start_before_any_job_and_only_once() -> None:
    tracker = _tracker(initial_workers=1, idle_timeout_ms=1_000)
    assert _check(tracker, 0) == [StartWorker(_rid(1), SPEC, "")]  # no job has declared slots
    assert _check(tracker, 10) == []  # still starting: counted
    tracker.handle(WorkerRegistered(_rid(1), 100))
    assert _check(tracker, 200, slots={_rid(1): (2, 2)}) == []
    # no job came: it is released like any idle worker, and not started again
    assert _check(tracker, 1_200, slots={_rid(1): (2, 2)}) == [CheckReleasable(_rid(1), "")]
    tracker.handle(ReleasableAnswered(_rid(1), True, 1_300))
    tracker.handle(WorkerTerminated(_rid(1), "stopped", 1_400))
    assert _check(tracker, 1_500) == []
    assert _check(tracker, 1_600, missing=1) == [StartWorker(_rid(2), SPEC, "")]  # a job's need


def test_initial_workers_are_not_added_to_a_jobs_declared_slots() -> None:
    tracker = _tracker(initial_workers=2)
    # a job declared 2 slots before the first check: the job's need replaces the initial one
    assert _check(tracker, 0, missing=2) == [StartWorker(_rid(1), SPEC, "")]
    assert _check(tracker, 10, missing=2) == []
    # the initial workers count what user TaskManagers already offer
    tracker = _tracker(initial_workers=2)
    assert _check(tracker, 0, slots={ResourceID("user"): (2, 2)}) == [StartWorker(_rid(1), SPEC, "")]
