from __future__ import annotations

import itertools

import pytest

from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.executiongraph.intermediate_result import (
    ConsumedSubpartitions,
    compute_subpartition_mapping,
)
from flintlock.runtime.ids import IntermediateDataSetID, JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import IntermediateDataSet, JobEdge, JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import (
    ALLOWED_EXECUTION_TRANSITIONS,
    ALLOWED_JOB_TRANSITIONS,
    ExecutionState,
    IllegalStateTransition,
    JobStatus,
    JobType,
    ResultPartitionType,
    ShipStrategy,
)

S = ShipStrategy
BLOCKING = ResultPartitionType.BLOCKING


def make_job(
    vertices: list[tuple[str, int]],
    edges: list[tuple[int, int, ShipStrategy]],
    result_type: ResultPartitionType = BLOCKING,
) -> JobGraph:
    """Vertices (name, parallelism) in topological order; edges (producer, consumer, strategy)."""
    ids = [JobVertexID.generate() for _ in vertices]
    results: dict[int, list[IntermediateDataSet]] = {i: [] for i in range(len(vertices))}
    inputs: dict[int, list[JobEdge]] = {i: [] for i in range(len(vertices))}
    for src, dst, ship in edges:
        ds = IntermediateDataSet(IntermediateDataSetID.generate(), ids[src], result_type, ids[dst], ship)
        results[src].append(ds)
        inputs[dst].append(JobEdge(ds.id, ids[dst], ship, len(inputs[dst])))
    jvs = tuple(
        JobVertex(ids[i], name, p, 128, "tests:Noop", inputs=tuple(inputs[i]), results=tuple(results[i]))
        for i, (name, p) in enumerate(vertices)
    )
    return JobGraph(JobID.generate(), "test-job", JobType.BATCH, jvs)


def clock() -> object:
    ticks = itertools.count(1_000)
    return lambda: next(ticks)


# ---- subpartition mapping (fact sheet 2.3) ------------------------------------------------------

C = ConsumedSubpartitions


@pytest.mark.parametrize(
    ("ship", "p", "c", "counts", "consumed"),
    [
        (S.HASH, 2, 3, (3, 3), [C((0, 1), 0, 0), C((0, 1), 1, 1), C((0, 1), 2, 2)]),
        (S.REBALANCE, 3, 2, (2, 2, 2), [C((0, 1, 2), 0, 0), C((0, 1, 2), 1, 1)]),
        (S.BROADCAST, 2, 3, (1, 1), [C((0, 1), 0, 0)] * 3),
        (S.GLOBAL, 3, 1, (1, 1, 1), [C((0, 1, 2), 0, 0)]),
        (S.FORWARD, 3, 3, (1, 1, 1), [C((0,), 0, 0), C((1,), 0, 0), C((2,), 0, 0)]),
        # RESCALE, P >= C: consumer i reads partitions [floor(iP/C), floor((i+1)P/C) - 1]
        (S.RESCALE, 4, 2, (1, 1, 1, 1), [C((0, 1), 0, 0), C((2, 3), 0, 0)]),
        (S.RESCALE, 5, 2, (1,) * 5, [C((0, 1), 0, 0), C((2, 3, 4), 0, 0)]),
        (S.RESCALE, 3, 3, (1, 1, 1), [C((0,), 0, 0), C((1,), 0, 0), C((2,), 0, 0)]),
        # RESCALE, P < C: producer p feeds consumers [ceil(pC/P), ceil((p+1)C/P) - 1]
        (S.RESCALE, 2, 4, (2, 2), [C((0,), 0, 0), C((0,), 1, 1), C((1,), 0, 0), C((1,), 1, 1)]),
        (S.RESCALE, 2, 5, (3, 2), [C((0,), 0, 0), C((0,), 1, 1), C((0,), 2, 2), C((1,), 0, 0), C((1,), 1, 1)]),
        (S.RESCALE, 3, 4, (2, 1, 1), [C((0,), 0, 0), C((0,), 1, 1), C((1,), 0, 0), C((2,), 0, 0)]),
    ],
)
def test_subpartition_mapping(ship: ShipStrategy, p: int, c: int, counts: tuple[int, ...], consumed: list[C]) -> None:
    mapping = compute_subpartition_mapping(ship, p, c)
    assert mapping.subpartitions_per_partition == counts
    assert list(mapping.consumed) == consumed


@pytest.mark.parametrize(("p", "c"), [(1, 2), (3, 7), (7, 3), (5, 5)])
def test_rescale_reads_every_subpartition_exactly_once(p: int, c: int) -> None:
    mapping = compute_subpartition_mapping(S.RESCALE, p, c)
    read = sorted(
        (n, sp)
        for cs in mapping.consumed
        for n in cs.partition_numbers
        for sp in range(cs.subpartition_start, cs.subpartition_end + 1)
    )
    expected = sorted((n, sp) for n in range(p) for sp in range(mapping.subpartitions_per_partition[n]))
    assert read == expected


@pytest.mark.parametrize(("ship", "p", "c", "needle"), [(S.GLOBAL, 2, 2, "GLOBAL"), (S.FORWARD, 2, 3, "FORWARD")])
def test_invalid_edges_are_rejected(ship: ShipStrategy, p: int, c: int, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        compute_subpartition_mapping(ship, p, c)
    with pytest.raises(ValueError, match="'a' -> 'b'"):
        ExecutionGraph(make_job([("a", p), ("b", c)], [(0, 1, ship)]), clock())


# ---- building ------------------------------------------------------------------------------------


def test_build_expands_vertices_partitions_and_consumers() -> None:
    job = make_job([("src", 2), ("agg", 3), ("sink", 1)], [(0, 1, S.HASH), (1, 2, S.GLOBAL)])
    graph = ExecutionGraph(job, clock())
    graph.validate()
    src, agg, sink = (graph.job_vertices[v.id] for v in job.vertices)
    assert [len(v.task_vertices) for v in (src, agg, sink)] == [2, 3, 1]
    (hash_result,) = src.produced_results
    assert [p.number_of_subpartitions for p in hash_result.partitions] == [3, 3]
    assert hash_result.partitions[1].consumers == tuple(v.id for v in agg.task_vertices)
    agg1 = agg.task_vertices[1]
    (gate,) = agg1.inputs
    assert gate.consumed == C((0, 1), 1, 1)
    assert [p.id.partition_number for p in gate.partitions()] == [0, 1]
    assert graph.consumed_partition_ids(sink.task_vertices[0].id) == [p.id for p in agg.produced_results[0].partitions]
    e = agg1.current_execution
    assert e.attempt_number == 0 and e.state is ExecutionState.CREATED
    assert e.task_name_with_subtask() == "agg (2/3)#0"
    assert graph.find_current_execution(e.attempt_id) is e


def test_reset_for_new_execution_creates_next_attempt_and_reopens_partitions() -> None:
    graph = ExecutionGraph(make_job([("a", 1), ("b", 1)], [(0, 1, S.FORWARD)]), clock())
    v = next(graph.execution_vertices())
    first = v.current_execution
    with pytest.raises(RuntimeError, match="still CREATED"):
        v.reset_for_new_execution(0)
    for s in (ExecutionState.SCHEDULED, ExecutionState.CANCELED):
        graph.transition_execution(first, s)
    second = graph.reset_vertex(v.id, 5)
    assert second.attempt_number == 1 and list(v.prior_executions) == [first]
    assert graph.find_current_execution(first.attempt_id) is None
    assert not v.produced_partitions[0].finished
    graph.validate()


# ---- transition tables ---------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "target"), list(itertools.product(JobStatus, JobStatus)))
def test_job_transition_table(source: JobStatus, target: JobStatus) -> None:
    graph = ExecutionGraph(make_job([("a", 1)], []), clock())
    graph.state = source
    if target in ALLOWED_JOB_TRANSITIONS[source]:
        graph.transition_to(target)
        assert graph.state is target and target in graph.state_timestamps
    else:
        with pytest.raises(IllegalStateTransition):
            graph.transition_to(target)
        assert graph.state is source


@pytest.mark.parametrize(("source", "target"), list(itertools.product(ExecutionState, ExecutionState)))
def test_execution_transition_table(source: ExecutionState, target: ExecutionState) -> None:
    graph = ExecutionGraph(make_job([("a", 1)], []), clock())
    e = next(graph.current_executions())
    e.state = source
    if target in ALLOWED_EXECUTION_TRANSITIONS[source]:
        graph.transition_execution(e, target)
        assert e.state is target and target in e.state_timestamps
    else:
        with pytest.raises(IllegalStateTransition):
            graph.transition_execution(e, target)
        assert e.state is source


def test_illegal_transition_carries_the_story() -> None:
    graph = ExecutionGraph(make_job([("map", 2)], []), clock())
    e = next(graph.current_executions())
    graph.transition_execution(e, ExecutionState.SCHEDULED, "region scheduled")
    graph.transition_execution(e, ExecutionState.DEPLOYING)
    graph.transition_execution(e, ExecutionState.FINISHED)
    with pytest.raises(IllegalStateTransition) as info:
        graph.transition_execution(e, ExecutionState.RUNNING)
    text = str(info.value)
    assert "map (1/2)#0" in text and "FINISHED -> RUNNING" in text
    assert "CREATED -> SCHEDULED region scheduled" in text and "DEPLOYING -> FINISHED" in text
    graph.transition_to(JobStatus.RUNNING)
    with pytest.raises(IllegalStateTransition, match="RUNNING -> CREATED") as info:
        graph.transition_to(JobStatus.CREATED)
    assert "job CREATED -> RUNNING" in str(info.value)


def test_archive_snapshot() -> None:
    job = make_job([("a", 2), ("b", 1)], [(0, 1, S.REBALANCE)])
    graph = ExecutionGraph(job, clock(), initialization_timestamp_ms=500)
    graph.transition_to(JobStatus.RUNNING)
    archived = graph.archive(pending_slot_requests=3)
    assert archived.state is JobStatus.RUNNING
    assert archived.start_time() == 500
    assert [v.name for v in archived.vertices] == ["a", "b"]
    assert [s.subtask_index for s in archived.vertices[0].subtasks] == [0, 1]
    assert archived.vertices[0].state is ExecutionState.CREATED
    assert archived.pending_slot_requests == 3
    assert set(archived.state_timestamps) == {"INITIALIZING", "CREATED", "RUNNING"}
