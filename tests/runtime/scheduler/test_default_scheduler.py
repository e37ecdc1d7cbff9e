"""Layer 1: the scheduler core driven with events; assertions on the exact commands."""

from __future__ import annotations

import pytest
from scheduler_driver import PIPELINED, TM, Driver, S, deploys, make_job, names

from flintlock.runtime.executiongraph.execution import Execution
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.executiongraph.failover.pipelined_regions import build_pipelined_regions
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID
from flintlock.runtime.jobgraph.types import ExecutionState, IllegalStateTransition, JobStatus
from flintlock.runtime.metrics.live_task_metrics import LiveTaskMetrics
from flintlock.runtime.scheduler.messages import (
    CancelJob,
    CancelTask,
    DeclareResources,
    FinalizeSinks,
    FreeSlot,
    JobTerminated,
    NotEnoughResources,
    ReleasePartitions,
    SinksFinalized,
    StartScheduling,
    TaskManagerLost,
)
from flintlock.runtime.scheduler.strategy import PipelinedRegionSchedulingStrategy
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics, SerializedError


class RecordingSink:
    def describe(self) -> str:
        return "recording"


# ---- strategy ------------------------------------------------------------------------------------


def test_strategy_schedules_consumer_region_only_after_all_producers_finished() -> None:
    job = make_job([("a", 2), ("b", 2), ("c", 1)], [(0, 1, S.HASH), (1, 2, S.REBALANCE)])
    graph = ExecutionGraph(job, lambda: 0)
    finished: set[object] = set()
    strategy = PipelinedRegionSchedulingStrategy(build_pipelined_regions(graph), finished.__contains__)
    vid = {f"{v.job_vertex.name}{v.subtask_index}": v.id for v in graph.execution_vertices()}

    def done(name: str) -> list[list[str]]:
        v = graph.vertex(vid[name])
        finished.update(p.id for p in v.produced_partitions)
        return [[f"{graph.vertex(x).job_vertex.name}{graph.vertex(x).subtask_index}" for x in c.vertices]
                for c in strategy.on_execution_finished(vid[name])]

    assert [[graph.vertex(x).subtask_index for x in c.vertices] for c in strategy.start_scheduling()] == [[0], [1]]
    assert done("a0") == []
    assert done("a1") == [["b0"], ["b1"]]
    assert done("a1") == []  # already scheduled
    assert done("b0") == []
    assert done("b1") == [["c0"]]
    assert [len(c.vertices) for c in strategy.restart_tasks([vid["b0"]])] == [1]


# ---- full batch run ------------------------------------------------------------------------------


def test_batch_job_runs_region_by_region_and_commits_sinks() -> None:
    sink = RecordingSink()
    d = Driver(make_job([("src", 2), ("sink", 2)], [(0, 1, S.HASH)], sinks={1: (sink,)}))
    cmds = d.handle(StartScheduling({d.graph.job_graph.vertices[0].id: [["s0"], ["s1"]]}))
    assert cmds == [DeclareResources.default_slots(2)]
    assert d.graph.state is JobStatus.RUNNING
    accepted, cmds = d.offer(3)
    assert len(accepted) == 2  # the third slot is not needed
    assert names(cmds) == ["src (1/2)#0", "src (2/2)#0"]
    src0, src1 = deploys(cmds)
    assert src0.tdd.source_splits == ("s0",) and src1.tdd.source_splits == ("s1",)
    assert [rp.number_of_subpartitions for rp in src0.tdd.produced_partitions] == [2]
    assert src0.tdd.produced_partitions[0].key_columns == ("k",)

    d.report(src0.tdd.attempt_id, ExecutionState.INITIALIZING)
    d.report(src0.tdd.attempt_id, ExecutionState.RUNNING)
    cmds = d.finish(src0)
    assert cmds == [DeclareResources.default_slots(1)]  # consumer region not ready: slot idles
    cmds = d.finish(src1)
    # both consumers go into the two idle slots: nothing new to declare
    assert names(cmds) == ["sink (1/2)#0", "sink (2/2)#0"]
    assert DeclareResources.default_slots(2) in cmds
    sink0, sink1 = deploys(cmds)
    gate = sink1.tdd.input_gates[0]
    assert (gate.subpartition_start, gate.subpartition_end) == (1, 1)
    assert [p.producer_attempt for p in gate.partitions] == [src0.tdd.attempt_id, src1.tdd.attempt_id]
    assert gate.schema == "k string"
    assert {sink0.tdd.allocation_id, sink1.tdd.allocation_id} == {src0.tdd.allocation_id, src1.tdd.allocation_id}

    d.finish(sink1, committables={0: "c1"})
    cmds = d.finish(sink0, committables={0: "c0"})
    assert cmds == [FinalizeSinks(True, ((sink, ("c0", "c1")),)), DeclareResources.default_slots(0)]
    assert d.graph.state is JobStatus.RUNNING
    cmds = d.handle(SinksFinalized())
    assert d.graph.state is JobStatus.FINISHED
    release = [c for c in cmds if isinstance(c, ReleasePartitions)]
    assert len(release) == 1 and len(release[0].partition_ids) == 2
    assert sum(isinstance(c, FreeSlot) for c in cmds) == 2
    (terminated,) = [c for c in cmds if isinstance(c, JobTerminated)]
    assert terminated.result.application_status == "SUCCEEDED"
    assert set(terminated.result.accumulator_results) == {
        "acc-src-0", "acc-src-1", "acc-sink-0", "acc-sink-1"}


def test_slot_sharing_in_one_pipelined_region() -> None:
    d = Driver(make_job([("a", 2), ("b", 2)], [(0, 1, S.HASH)], result_type=PIPELINED))
    assert d.handle(StartScheduling()) == [DeclareResources.default_slots(2)]
    _, cmds = d.offer(1)
    assert deploys(cmds) == []  # bulk waits until every shared slot is there
    _, cmds = d.offer(1)
    by_slot: dict[object, list[str]] = {}
    for c in deploys(cmds):
        by_slot.setdefault(c.tdd.allocation_id, []).append(c.tdd.task_name_with_subtask())
    assert sorted(by_slot.values()) == [["a (1/2)#0", "b (1/2)#0"], ["a (2/2)#0", "b (2/2)#0"]]
    # deployed together: each consumer already knows where every producer writes its partition
    tdds = {c.tdd.task_name_with_subtask(): c.tdd for c in deploys(cmds)}
    produced = [tdds[f"a ({i}/2)#0"].produced_partitions[0] for i in (1, 2)]
    assert all(r.uri.startswith("/pipelined-root/") and r.number_of_consumers == 2 for r in produced)
    for i in (1, 2):
        (gate,) = tdds[f"b ({i}/2)#0"].input_gates
        assert [loc.uri for loc in gate.partitions] == [r.uri for r in produced]
        assert gate.subpartition_start == gate.subpartition_end == i - 1


def test_task_failure_without_restart_fails_job_with_root_cause() -> None:
    sink = RecordingSink()
    d = Driver(make_job([("a", 2)], [], sinks={0: (sink,)}))
    d.handle(StartScheduling())
    _, cmds = d.offer(2)
    a0, a1 = deploys(cmds)
    d.report(a1.tdd.attempt_id, ExecutionState.RUNNING)
    d.finish(a1, committables={0: "partial"})  # finished attempts are aborted too
    error = SerializedError("ValueError", "boom")
    cmds = d.report(a0.tdd.attempt_id, ExecutionState.FAILED, error=error, task_manager="tm-1")
    assert d.graph.state is JobStatus.FAILING
    assert cmds == [FinalizeSinks(False, ((sink, ("partial",)),)), DeclareResources.default_slots(0)]
    cmds = d.handle(SinksFinalized())
    assert d.graph.state is JobStatus.FAILED
    (terminated,) = [c for c in cmds if isinstance(c, JobTerminated)]
    failure = terminated.result.failure
    assert terminated.result.application_status == "FAILED"
    assert failure is not None and failure.error == error
    assert failure.task_name == "a (1/2)#0" and failure.location == "tm-1"


def test_failure_cancels_running_tasks_before_failing() -> None:
    d = Driver(make_job([("a", 3)], []))
    d.handle(StartScheduling())
    _, cmds = d.offer(2)  # a2 waits for a slot (separate bulk)
    a0, a1 = deploys(cmds)
    d.report(a1.tdd.attempt_id, ExecutionState.RUNNING)
    cmds = d.report(a0.tdd.attempt_id, ExecutionState.FAILED, error=SerializedError("E", "x"))
    assert [c for c in cmds if isinstance(c, CancelTask)] == [CancelTask("inproc://tm-1", a1.tdd.attempt_id)]
    assert d.graph.state is JobStatus.FAILING
    a2 = d.graph.vertex(ExecutionVertexID(a1.tdd.attempt_id.job_vertex_id, 2))
    assert a2.current_execution.state is ExecutionState.CANCELED
    # a late RUNNING report while cancelling is ignored; CANCELED completes the job
    d.report(a1.tdd.attempt_id, ExecutionState.RUNNING)
    cmds = d.report(a1.tdd.attempt_id, ExecutionState.CANCELED)
    assert d.graph.state is JobStatus.FAILED
    assert [c.result.application_status for c in cmds if isinstance(c, JobTerminated)] == ["FAILED"]


def test_cancel_job() -> None:
    d = Driver(make_job([("a", 1), ("b", 1)], [(0, 1, S.FORWARD)]))
    d.handle(StartScheduling())
    _, cmds = d.offer(1)
    (a0,) = deploys(cmds)
    cmds = d.handle(CancelJob())
    assert cmds == [CancelTask("inproc://tm-1", a0.tdd.attempt_id)]
    assert d.graph.state is JobStatus.CANCELLING
    assert d.handle(CancelJob()) == []  # idempotent
    cmds = d.report(a0.tdd.attempt_id, ExecutionState.CANCELED)
    assert d.graph.state is JobStatus.CANCELED
    assert [c.result.application_status for c in cmds if isinstance(c, JobTerminated)] == ["CANCELED"]


def _one_running_attempt() -> tuple[Driver, ExecutionAttemptID, Execution]:
    d = Driver(make_job([("a", 1)], []))
    d.handle(StartScheduling())
    _, cmds = d.offer(1)
    (a0,) = deploys(cmds)
    attempt = a0.tdd.attempt_id
    d.report(attempt, ExecutionState.INITIALIZING)
    d.report(attempt, ExecutionState.RUNNING)
    execution = d.graph.find_current_execution(attempt)
    assert execution is not None
    return d, attempt, execution


def test_a_cancelled_attempt_keeps_what_its_task_reported_at_the_end() -> None:
    """Live reports while running, then the final counts with CANCELED (Flink's
    TaskExecutionState.ioMetrics): the archived attempt shows the final counts, not the last
    live report, and a vertex sums them."""
    d, attempt, execution = _one_running_attempt()
    execution.live_metrics = LiveTaskMetrics(attempt, 0, records_in=1200, bytes_in=9000,
                                             accumulated_back_pressured_ms=40.0,
                                             accumulated_idle_ms=25.0)
    assert execution.archive().metrics == IOMetrics(1200, 0, 9000, 0)
    d.handle(CancelJob())
    d.report(attempt, ExecutionState.CANCELED, metrics=IOMetrics(2000, 1500, 16_000, 12_000))
    assert d.graph.state is JobStatus.CANCELED
    (vertex,) = d.graph.archive().vertices
    assert vertex.subtasks[0].state is ExecutionState.CANCELED
    assert vertex.subtasks[0].metrics == IOMetrics(2000, 1500, 16_000, 12_000)
    # the waiting times of the last live report stay with the ended attempt
    assert (vertex.subtasks[0].accumulated_back_pressured_ms,
            vertex.subtasks[0].accumulated_idle_ms) == (40.0, 25.0)
    assert vertex.metrics() == IOMetrics(2000, 1500, 16_000, 12_000)


def test_an_attempt_whose_task_could_not_report_keeps_its_last_live_counts() -> None:
    d, attempt, execution = _one_running_attempt()
    execution.live_metrics = LiveTaskMetrics(attempt, 0, records_out=700, bytes_out=5600)
    d.handle(CancelJob())
    d.report(attempt, ExecutionState.CANCELED)  # e.g. cancelled before its counters existed
    assert d.graph.archive().vertices[0].subtasks[0].metrics == IOMetrics(0, 700, 0, 5600)


def test_a_cancel_that_overtook_the_deployment_is_sent_again() -> None:
    """The TaskExecutor acknowledged a cancel for a task it did not know yet, then started it:
    its INITIALIZING/RUNNING report makes the JobMaster cancel it again (Flink switchToRunning)."""
    d = Driver(make_job([("a", 1)], []))
    d.handle(StartScheduling())
    _, cmds = d.offer(1)
    (a0,) = deploys(cmds)
    attempt = a0.tdd.attempt_id
    assert d.handle(CancelJob()) == [CancelTask("inproc://tm-1", attempt)]
    assert d.report(attempt, ExecutionState.INITIALIZING) == [CancelTask("inproc://tm-1", attempt)]
    assert d.report(attempt, ExecutionState.RUNNING) == [CancelTask("inproc://tm-1", attempt)]
    assert d.graph.state is JobStatus.CANCELLING
    cmds = d.report(attempt, ExecutionState.CANCELED)
    assert d.graph.state is JobStatus.CANCELED
    assert [c.result.application_status for c in cmds if isinstance(c, JobTerminated)] == ["CANCELED"]


def test_slot_request_timeout_fails_with_clear_message() -> None:
    d = Driver(make_job([("a", 3), ("b", 3)], [(0, 1, S.HASH)], result_type=PIPELINED))
    d.handle(StartScheduling())
    d.offer(2)
    d.advance(9.9)
    assert d.graph.state is JobStatus.RUNNING
    cmds = d.advance(0.2)
    assert d.graph.state is JobStatus.FAILED
    (terminated,) = [c for c in cmds if isinstance(c, JobTerminated)]
    failure = terminated.result.failure
    assert failure is not None
    assert failure.error.class_name.endswith("NoResourceAvailableException")
    assert failure.error.message.startswith(
        "Could not acquire the minimum required resources: the job needs 3 slot(s) at once, "
        "the cluster offered 2 slot(s) within slot.request.timeout=10s"
    )


def test_slot_request_timeout_names_what_the_resource_manager_reported() -> None:
    d = Driver(make_job([("a", 1)], []))
    d.handle(StartScheduling())
    cause = "start-up failures exceed 10/min (last: taskmanager-1 could not start: /bad/python)"
    assert d.handle(NotEnoughResources(cause)) == []  # the job keeps waiting until the timeout
    assert d.graph.state is JobStatus.RUNNING
    cmds = d.advance(10.1)
    (terminated,) = [c for c in cmds if isinstance(c, JobTerminated)]
    assert terminated.result.failure is not None
    assert terminated.result.failure.error.message.endswith(
        f"The ResourceManager reported: {cause}")


def test_idle_slots_are_freed_after_idle_timeout() -> None:
    d = Driver(make_job([("a", 2), ("b", 1)], [(0, 1, S.REBALANCE)]))
    d.handle(StartScheduling())
    _, cmds = d.offer(2)
    a0, a1 = deploys(cmds)
    d.finish(a0)
    d.advance(3)
    cmds = d.finish(a1)
    assert names(cmds) == ["b (1/1)#0"]
    # b reuses the slot idle since t=0; a1's slot idles from t=3 and is freed at t=8
    assert deploys(cmds)[0].tdd.allocation_id == a0.tdd.allocation_id
    assert d.advance(4.9) == []
    assert d.advance(0.2) == [FreeSlot("inproc://tm-1", a1.tdd.allocation_id, "slot idle timeout")]


def test_region_restart_with_fixed_delay() -> None:
    job = make_job([("a", 2), ("b", 2)], [(0, 1, S.HASH)],
                   configuration={"restart-strategy.type": "fixed-delay",
                                  "restart-strategy.fixed-delay.delay": "2 s"})
    d = Driver(job)
    d.handle(StartScheduling())
    _, cmds = d.offer(2)
    a0, a1 = deploys(cmds)
    d.finish(a0)
    b0, b1 = deploys(d.finish(a1))
    d.report(b1.tdd.attempt_id, ExecutionState.RUNNING)
    cmds = d.report(b0.tdd.attempt_id, ExecutionState.FAILED, error=SerializedError("E", "flaky"))
    assert d.graph.state is JobStatus.RESTARTING
    assert deploys(cmds) == [] and d.graph.number_of_restarts == 1
    cmds = d.advance(2.1)
    assert d.graph.state is JobStatus.RUNNING
    assert names(cmds) == ["b (1/2)#1"]  # only the failed region; inputs still available
    gate = deploys(cmds)[0].tdd.input_gates[0]
    assert [p.producer_attempt for p in gate.partitions] == [a0.tdd.attempt_id, a1.tdd.attempt_id]
    # second failure exceeds attempts=1
    cmds = d.report(deploys(cmds)[0].tdd.attempt_id, ExecutionState.FAILED, error=SerializedError("E", "again"))
    assert d.graph.state is JobStatus.FAILING
    assert cmds == [CancelTask("inproc://tm-1", b1.tdd.attempt_id), DeclareResources.default_slots(1)]
    archived = d.graph.archive()
    assert [len(v.prior_attempts) for v in archived.vertices] == [0, 1]
    assert len(archived.exception_history) == 2


def test_task_manager_loss_fails_its_tasks() -> None:
    d = Driver(make_job([("a", 1)], []))
    d.handle(StartScheduling())
    _, cmds = d.offer(1)
    cmds = d.handle(TaskManagerLost(TM, "heartbeat timed out"))
    assert d.graph.state is JobStatus.FAILED
    (terminated,) = [c for c in cmds if isinstance(c, JobTerminated)]
    assert terminated.result.failure is not None
    assert "TaskManager tm-1 is lost: heartbeat timed out" in terminated.result.failure.error.message


def test_unknown_and_old_attempts_are_ignored_but_illegal_reports_raise() -> None:
    d = Driver(make_job([("a", 1)], []))
    d.handle(StartScheduling())
    _, cmds = d.offer(1)
    (a0,) = deploys(cmds)
    other = ExecutionAttemptID.generate(a0.tdd.attempt_id.execution_vertex_id, 7)
    assert d.report(other, ExecutionState.FAILED, error=SerializedError("E", "x")) == []
    d.report(a0.tdd.attempt_id, ExecutionState.RUNNING)
    with pytest.raises(IllegalStateTransition, match="RUNNING -> INITIALIZING"):
        d.report(a0.tdd.attempt_id, ExecutionState.INITIALIZING)


def test_other_regions_progress_while_one_region_restarts() -> None:
    job = make_job([("a", 2), ("b", 2)], [(0, 1, S.FORWARD)],
                   configuration={"restart-strategy.type": "fixed-delay",
                                  "restart-strategy.fixed-delay.delay": "1 s"})
    d = Driver(job)
    d.handle(StartScheduling())
    _, cmds = d.offer(2)
    a0, a1 = deploys(cmds)
    d.report(a1.tdd.attempt_id, ExecutionState.RUNNING)
    d.report(a0.tdd.attempt_id, ExecutionState.FAILED, error=SerializedError("E", "x"))
    assert d.graph.state is JobStatus.RESTARTING
    cmds = d.finish(a1)
    assert names(cmds) == ["b (2/2)#0"]  # a1's consumer region does not wait for a0's restart
    cmds = d.advance(1.0)
    assert names(cmds) == ["a (1/2)#1"] and d.graph.state is JobStatus.RUNNING
    assert names(d.finish(deploys(cmds)[0])) == ["b (1/2)#0"]
