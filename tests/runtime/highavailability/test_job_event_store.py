"""The job event store of batch job recovery: records round trip through the RPC codec's
restricted unpickler, a later record replaces an earlier one, unreadable records are skipped."""

from __future__ import annotations

from pathlib import Path

from flintlock.runtime.deployment import PartitionLocation
from flintlock.runtime.executiongraph.intermediate_result import ConsumedSubpartitions
from flintlock.runtime.highavailability.job_event_store import (
    FileSystemJobEventStore,
    VertexInitialization,
)
from flintlock.runtime.ids import (
    ExecutionAttemptID,
    ExecutionVertexID,
    IntermediateDataSetID,
    IntermediateResultPartitionID,
    JobID,
    JobVertexID,
)
from flintlock.runtime.scheduler.adaptivebatch.vertex_parallelism_decider import (
    ParallelismAndInputInfos,
)
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics, TaskResult


def _result(vertex: ExecutionVertexID, rows: int) -> TaskResult:
    partition = IntermediateResultPartitionID(IntermediateDataSetID.generate(),
                                              vertex.subtask_index)
    location = PartitionLocation(partition, ExecutionAttemptID.generate(vertex, 0), "/shuffle/p",
                                 (rows,), (rows * 8,), "id bigint")
    return TaskResult((location,), {0: "/out/_temporary/j/a0"}, {"acc": b"x"},
                      IOMetrics(records_out=rows))


def test_records_round_trip_are_replaced_and_removed(tmp_path: Path) -> None:
    store = FileSystemJobEventStore(str(tmp_path / "events"))
    job, other = JobID.generate(), JobID.generate()
    assert store.finished(job) == {}
    v0, v1 = (ExecutionVertexID(JobVertexID.generate(), i) for i in (0, 1))
    first, second, third = _result(v0, 1), _result(v1, 2), _result(v0, 3)
    store.record_finished(job, v0, first)
    store.record_finished(job, v1, second)
    store.record_finished(other, v0, first)
    assert store.finished(job) == {v0: first, v1: second}
    store.record_finished(job, v0, third)  # finished again after a restart
    assert store.finished(job) == {v0: third, v1: second}
    store.remove(job)
    store.remove(job)  # idempotent
    assert store.finished(job) == {} and store.finished(other) == {v0: first}


def test_an_unreadable_record_is_skipped(tmp_path: Path) -> None:
    store = FileSystemJobEventStore(str(tmp_path / "events"))
    job = JobID.generate()
    v0 = ExecutionVertexID(JobVertexID.generate(), 0)
    store.record_finished(job, v0, _result(v0, 1))
    (tmp_path / "events" / str(job) / "garbage-0").write_bytes(b"\x80\x05not a pickle")
    (tmp_path / "events" / str(job) / "evil-0").write_bytes(
        b"\x80\x04\x95\x15\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x8c\x06system\x93.")
    assert list(store.finished(job)) == [v0]


def test_vertex_initializations_round_trip_in_order_and_are_dropped_from_a_number_on(
        tmp_path: Path) -> None:
    store = FileSystemJobEventStore(str(tmp_path / "events"))
    job = JobID.generate()
    ds = IntermediateDataSetID.generate()
    decisions = [
        ParallelismAndInputInfos(3, ((0, 1), (2, 2), (3, 3)), "balanced by data volume"),
        ParallelismAndInputInfos(2, (), "even", {ds: (
            (ConsumedSubpartitions((0, 1), 0, 3),), (ConsumedSubpartitions((0,), 4, 7),))},
            "right", "broadcast join"),
    ]
    vertices = [JobVertexID.generate(), JobVertexID.generate()]
    for i, (v, d) in enumerate(zip(vertices, decisions, strict=True)):
        store.record_initialization(job, i, VertexInitialization(v, d))
    vertex = ExecutionVertexID(vertices[0], 0)
    store.record_finished(job, vertex, _result(vertex, 5))
    assert store.initializations(job) == [VertexInitialization(v, d) for v, d in
                                          zip(vertices, decisions, strict=True)]
    assert list(store.finished(job)) == [vertex]  # the initializations are not subtasks
    store.drop_initializations(job, 1)
    assert store.initializations(job) == [VertexInitialization(vertices[0], decisions[0])]
    # a gap ends the sequence: what follows it is decided anew
    store.record_initialization(job, 2, VertexInitialization(vertices[1], decisions[1]))
    assert len(store.initializations(job)) == 1
