"""Layer 1: failover through the scheduler core, with exact attempt numbers and timer delays.

TaskManager loss and TM-local partitions (Flink ``storesLocalResourcesOn`` +
``stopTrackingPartitionsFor``), idle-slot reuse on restart (``slot.idle.timeout``), and the
exponential-delay back-off observed as the scheduler's ``ScheduleTimer`` delays on a ManualClock.
"""

from __future__ import annotations

from scheduler_driver import Driver, S, deploys, make_job, names

from flintlock.runtime.ids import ResourceID
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus
from flintlock.runtime.scheduler.messages import (
    CancelTask,
    DeclareResources,
    FreeSlot,
    ReleasePartitions,
    RestartDelayElapsed,
    ScheduleTimer,
    StartScheduling,
    TaskManagerLost,
)
from flintlock.runtime.taskmanager.task_execution_state import SerializedError

TM1, TM2, TM3 = ResourceID("tm-1"), ResourceID("tm-2"), ResourceID("tm-3")
RESTART_1S = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
              "restart-strategy.fixed-delay.delay": "1 s"}


def _a_to_b(**conf: str) -> tuple[Driver, list]:
    """a(2) -HASH-> b(2), a0 deployed on TM1 and a1 on TM2 (one slot each)."""
    d = Driver(make_job([("a", 2), ("b", 2)], [(0, 1, S.HASH)], configuration={**RESTART_1S, **conf}))
    d.handle(StartScheduling())
    _, c1 = d.offer(1, TM1)
    _, c2 = d.offer(1, TM2)
    assert names(c1) == ["a (1/2)#0"] and names(c2) == ["a (2/2)#0"]
    return d, deploys(c1) + deploys(c2)


def _partition_of(d: Driver, vertex: str, subtask: int) -> object:
    (ejv,) = [v for v in d.graph.job_vertices.values() if v.name == vertex]
    (partition,) = ejv.task_vertices[subtask].produced_partitions
    return partition


# ---- TaskManager loss and TM-local partitions -------------------------------------------------------


def test_consumer_deployed_after_its_input_was_lost_reruns_only_that_producer() -> None:
    d, (a0, a1) = _a_to_b()
    d.finish(a0, tm_local=True)
    lost = _partition_of(d, "a", 0)
    cmds = d.handle(TaskManagerLost(TM1, "heartbeat timed out"))
    # nothing ran on TM1 any more: no task fails, but a0's partition is gone with it
    assert [c for c in cmds if isinstance(c, CancelTask)] == [] and d.graph.state is JobStatus.RUNNING
    assert not lost.available and lost.finished

    # a1 finishes: b is scheduled; b0 takes TM2's slot but cannot be deployed (input lost)
    cmds = d.finish(a1, tm_local=True)
    assert deploys(cmds) == []
    assert d.graph.state is JobStatus.RESTARTING and d.graph.number_of_restarts == 1
    (entry,) = d.graph.exception_history
    assert not entry.error.non_recoverable
    assert entry.error.partition_not_found == str(lost.id)
    assert entry.task_name == "b (1/2)#0"
    assert "is no longer available (TaskManager tm-1 is lost: heartbeat timed out)" in entry.error.message
    assert "its producer a (1/2) must run again" in entry.error.message

    cmds = d.advance(1.0)
    assert names(cmds) == ["a (1/2)#1"]  # a1's partition is still available: a1 does not re-run
    cmds = d.finish(deploys(cmds)[0], tm_local=True)
    assert names(cmds) == ["b (1/2)#1"]
    b0 = deploys(cmds)[0]
    _, cmds = d.offer(1, TM3)
    assert names(cmds) == ["b (2/2)#1"]
    b1 = deploys(cmds)[0]
    gate = b0.tdd.input_gates[0]
    assert [p.producer_attempt.attempt_number for p in gate.partitions] == [1, 0]
    assert [p.stores_local_resources_on for p in gate.partitions] == [TM2, TM2]
    d.finish(b0)
    d.finish(b1)
    assert d.graph.state is JobStatus.FINISHED
    assert (d.attempts("a"), d.attempts("b")) == ([1, 0], [1, 1])


def test_task_manager_loss_restarts_the_producer_of_its_local_partitions() -> None:
    d, (a0, a1) = _a_to_b()
    d.finish(a0, tm_local=True)
    b0, b1 = deploys(d.finish(a1, tm_local=True))
    assert (b0.tdd.allocation_id, b1.tdd.allocation_id) == (a0.tdd.allocation_id, a1.tdd.allocation_id)
    d.report(b0.tdd.attempt_id, ExecutionState.RUNNING)
    d.report(b1.tdd.attempt_id, ExecutionState.RUNNING)

    cmds = d.handle(TaskManagerLost(TM1, "heartbeat timed out"))
    # b0 (on TM1) fails; its input a0 was on TM1's disk: a0's region re-runs, and with it every
    # consumer of a0 (b1 too, Flink's rule for possibly non-deterministic producers)
    assert [c for c in cmds if isinstance(c, CancelTask)] == [CancelTask("inproc://tm-2", b1.tdd.attempt_id)]
    assert d.graph.state is JobStatus.RESTARTING
    d.report(b1.tdd.attempt_id, ExecutionState.CANCELED)
    cmds = d.advance(1.0)
    assert names(cmds) == ["a (1/2)#1"]
    assert deploys(cmds)[0].tdd.allocation_id == a1.tdd.allocation_id  # TM2's idle slot
    cmds = d.finish(deploys(cmds)[0], tm_local=True)
    assert names(cmds) == ["b (1/2)#1"]
    _, more = d.offer(1, TM3)
    assert names(more) == ["b (2/2)#1"]
    d.finish(deploys(cmds)[0])
    d.finish(deploys(more)[0])
    assert d.graph.state is JobStatus.FINISHED
    assert (d.attempts("a"), d.attempts("b")) == ([1, 0], [1, 1])
    assert d.graph.number_of_restarts == 1


def test_partitions_on_shared_storage_survive_task_manager_loss() -> None:
    d, (a0, a1) = _a_to_b()
    d.finish(a0)  # stores_local_resources_on=None: shared storage
    b0, b1 = deploys(d.finish(a1))
    d.report(b0.tdd.attempt_id, ExecutionState.RUNNING)
    d.report(b1.tdd.attempt_id, ExecutionState.RUNNING)

    cmds = d.handle(TaskManagerLost(TM1, "heartbeat timed out"))
    assert [c for c in cmds if isinstance(c, CancelTask)] == []  # b1 keeps running
    assert _partition_of(d, "a", 0).available
    assert d.advance(1.0) == [DeclareResources.default_slots(2)]  # b0#1 needs a slot: TM1's is gone
    _, cmds = d.offer(1, TM3)
    assert names(cmds) == ["b (1/2)#1"]
    gate = deploys(cmds)[0].tdd.input_gates[0]
    assert [p.producer_attempt for p in gate.partitions] == [a0.tdd.attempt_id, a1.tdd.attempt_id]
    d.finish(deploys(cmds)[0])
    d.finish(b1)
    assert d.graph.state is JobStatus.FINISHED
    assert (d.attempts("a"), d.attempts("b")) == ([0, 0], [1, 0])


def test_lost_task_managers_get_no_release_partitions_call() -> None:
    d = Driver(make_job([("a", 2), ("b", 1)], [(0, 1, S.REBALANCE)], configuration=RESTART_1S))
    d.handle(StartScheduling())
    _, c1 = d.offer(1, TM1)
    _, c2 = d.offer(1, TM2)
    d.finish(deploys(c1)[0])
    d.handle(TaskManagerLost(TM1, "gone"))  # shared storage: a0's partition stays available
    (b0,) = deploys(d.finish(deploys(c2)[0]))
    cmds = d.finish(b0)
    assert d.graph.state is JobStatus.FINISHED
    released = [c.task_executor_address for c in cmds if isinstance(c, ReleasePartitions)]
    assert released == ["inproc://tm-2"]


# ---- slot pool: restarts reuse idle slots --------------------------------------------------------


def _declared(d: Driver) -> list[int]:
    return [c.number_of_slots for c in d.commands if isinstance(c, DeclareResources)]


def test_restart_reuses_the_idle_slot_without_a_new_slot_request() -> None:
    d = Driver(make_job([("a", 1)], [], configuration=RESTART_1S))  # slot.idle.timeout 5 s
    d.handle(StartScheduling())
    _, cmds = d.offer(1)
    (a0,) = deploys(cmds)
    d.report(a0.tdd.attempt_id, ExecutionState.FAILED, error=SerializedError("E", "flaky"))
    assert d.graph.state is JobStatus.RESTARTING
    assert d.advance(0.99) == []
    cmds = d.advance(0.01)
    # deployed in the same step the back-off elapsed, into the slot kept idle meanwhile
    assert names(cmds) == ["a (1/1)#1"] and deploys(cmds)[0].tdd.allocation_id == a0.tdd.allocation_id
    assert d.scheduler.pending_slot_requests() == 0
    # the job never asked the ResourceManager for more slots than it owned (one)
    assert max(_declared(d)) == 1 and d.scheduler.pool.total_slots() == 1
    assert not any(isinstance(c, FreeSlot) for c in d.commands)


def test_restart_after_the_idle_timeout_needs_a_new_slot() -> None:
    conf = {**RESTART_1S, "restart-strategy.fixed-delay.delay": "6 s"}
    d = Driver(make_job([("a", 1)], [], configuration=conf))  # slot.idle.timeout 5 s < 6 s
    d.handle(StartScheduling())
    _, cmds = d.offer(1)
    (a0,) = deploys(cmds)
    d.report(a0.tdd.attempt_id, ExecutionState.FAILED, error=SerializedError("E", "flaky"))
    assert d.advance(5.0) == [FreeSlot("inproc://tm-1", a0.tdd.allocation_id, "slot idle timeout")]
    cmds = d.advance(1.0)
    assert deploys(cmds) == [] and cmds == [DeclareResources.default_slots(1)]
    assert d.scheduler.pending_slot_requests() == 1
    _, cmds = d.offer(1)
    assert names(cmds) == ["a (1/1)#1"]


# ---- exponential-delay back-off timings (ManualClock, no sleeping) --------------------------------


def _restart_delays(d: Driver) -> list[float]:
    return [c.delay_s for c in d.commands
            if isinstance(c, ScheduleTimer) and isinstance(c.event, RestartDelayElapsed)]


def test_exponential_delay_backoff_through_the_scheduler() -> None:
    conf = {
        "restart-strategy.type": "exponential-delay",
        "restart-strategy.exponential-delay.initial-backoff": "1 s",
        "restart-strategy.exponential-delay.backoff-multiplier": "2",
        "restart-strategy.exponential-delay.max-backoff": "5 s",
        "restart-strategy.exponential-delay.reset-backoff-threshold": "20 s",
        "restart-strategy.exponential-delay.jitter-factor": "0",
    }
    d = Driver(make_job([("a", 1)], [], configuration=conf), **{"slot.idle.timeout": "1 min"})
    d.handle(StartScheduling())
    _, cmds = d.offer(1)
    attempt = deploys(cmds)[0].tdd.attempt_id
    tick = 2**-10  # ~1 ms, exact in binary floating point
    # (expected back-off, how long the attempt runs before it fails); a failure at the very
    # instant of the scheduled restart would merge into it (Flink: now <= nextRestartTimestamp)
    steps = [(1.0, 0.0), (2.0, tick), (4.0, tick), (5.0, tick), (5.0, 10.0), (1.0, 25.0)]
    for expected, run_for in steps:
        d.advance(run_for)
        d.report(attempt, ExecutionState.FAILED, error=SerializedError("E", "flaky"))
        assert d.graph.state is JobStatus.RESTARTING
        assert _restart_delays(d)[-1] == expected
        assert deploys(d.advance(expected - tick)) == []  # not a moment before the back-off
        (tdd,) = deploys(d.advance(tick))
        attempt = tdd.tdd.attempt_id
    # initial-backoff, x2, x2, capped at max-backoff; still capped after a 10 s run (< the 20 s
    # reset-backoff-threshold); back to initial-backoff after a 25 s run
    assert _restart_delays(d) == [1.0, 2.0, 4.0, 5.0, 5.0, 1.0]
    assert attempt.attempt_number == 6 and d.graph.number_of_restarts == 6
