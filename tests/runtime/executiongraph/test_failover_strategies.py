from __future__ import annotations

import itertools

import pytest

from flintlock.config.configuration import Configuration, IllegalConfigurationException
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.executiongraph.failover.failover_strategy import (
    RestartAllFailoverStrategy,
    RestartPipelinedRegionFailoverStrategy,
)
from flintlock.runtime.executiongraph.failover.pipelined_regions import build_pipelined_regions
from flintlock.runtime.executiongraph.failover.restart_backoff import (
    ExponentialDelayRestartBackoffTimeStrategy,
    FailureRateRestartBackoffTimeStrategy,
    FixedDelayRestartBackoffTimeStrategy,
    NoRestartBackoffTimeStrategy,
    restart_backoff_from_configuration,
)
from flintlock.runtime.ids import IntermediateDataSetID, JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import IntermediateDataSet, JobEdge, JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import (
    ExecutionState,
    JobType,
    ResultPartitionType,
    ShipStrategy,
)
from flintlock.runtime.taskmanager.task_execution_state import SerializedError

S = ShipStrategy
BLOCKING = ResultPartitionType.BLOCKING
PIPELINED = ResultPartitionType.PIPELINED_BOUNDED


def make_graph(
    vertices: list[tuple[str, int]], edges: list[tuple[int, int, ShipStrategy, ResultPartitionType]]
) -> ExecutionGraph:
    ids = [JobVertexID.generate() for _ in vertices]
    results: dict[int, list[IntermediateDataSet]] = {i: [] for i in range(len(vertices))}
    inputs: dict[int, list[JobEdge]] = {i: [] for i in range(len(vertices))}
    for src, dst, ship, rtype in edges:
        ds = IntermediateDataSet(IntermediateDataSetID.generate(), ids[src], rtype, ids[dst], ship)
        results[src].append(ds)
        inputs[dst].append(JobEdge(ds.id, ids[dst], ship, len(inputs[dst])))
    jvs = tuple(
        JobVertex(ids[i], n, p, 128, "tests:Noop", inputs=tuple(inputs[i]), results=tuple(results[i]))
        for i, (n, p) in enumerate(vertices)
    )
    ticks = itertools.count()
    return ExecutionGraph(JobGraph(JobID.generate(), "j", JobType.BATCH, jvs), lambda: next(ticks))


def names(graph: ExecutionGraph, vertex_ids: object) -> list[str]:
    out = []
    for v in vertex_ids:  # type: ignore[attr-defined]
        ev = graph.vertex(v)
        out.append(f"{ev.job_vertex.name}{ev.subtask_index}")
    return sorted(out)


# ---- pipelined regions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vertices", "edges", "expected"),
    [
        # BATCH, all blocking: every subtask its own region
        ([("a", 2), ("b", 2)], [(0, 1, S.HASH, BLOCKING)], [["a0"], ["a1"], ["b0"], ["b1"]]),
        # all-to-all pipelined: one region
        ([("a", 2), ("b", 2)], [(0, 1, S.HASH, PIPELINED)], [["a0", "a1", "b0", "b1"]]),
        # pointwise pipelined: one region per subtask chain
        ([("a", 2), ("b", 2)], [(0, 1, S.FORWARD, PIPELINED)], [["a0", "b0"], ["a1", "b1"]]),
        # pipelined forward, then blocking hash
        (
            [("a", 2), ("b", 2), ("c", 1)],
            [(0, 1, S.FORWARD, PIPELINED), (1, 2, S.HASH, BLOCKING)],
            [["a0", "b0"], ["a1", "b1"], ["c0"]],
        ),
        # rescale 4 -> 2 pipelined: pairs
        ([("a", 4), ("b", 2)], [(0, 1, S.RESCALE, PIPELINED)], [["a0", "a1", "b0"], ["a2", "a3", "b1"]]),
    ],
)
def test_pipelined_regions(vertices: list, edges: list, expected: list[list[str]]) -> None:
    graph = make_graph(vertices, edges)
    regions = build_pipelined_regions(graph)
    assert [names(graph, r.vertices) for r in regions] == expected


def test_region_inputs_and_consumers() -> None:
    graph = make_graph([("a", 2), ("b", 1)], [(0, 1, S.REBALANCE, BLOCKING)])
    regions = build_pipelined_regions(graph)
    a0, a1, b0 = regions.regions
    assert not a0.consumed_blocking_partitions
    assert b0.consumed_blocking_partitions == frozenset(graph.partitions)
    assert regions.consumer_regions(a1) == [b0]
    assert regions.consumer_regions(b0) == []


def test_cycle_in_region_graph_is_merged() -> None:
    # FLINK-17330 shape: a -(pointwise pipelined)-> b and a -(all-to-all blocking)-> b would
    # make region {a0,b0} and {a1,b1} depend on each other: they merge into one region.
    ids = [JobVertexID.generate(), JobVertexID.generate()]
    d1 = IntermediateDataSet(IntermediateDataSetID.generate(), ids[0], PIPELINED, ids[1], S.FORWARD)
    d2 = IntermediateDataSet(IntermediateDataSetID.generate(), ids[0], BLOCKING, ids[1], S.HASH)
    a = JobVertex(ids[0], "a", 2, 128, "x:y", results=(d1, d2))
    b = JobVertex(ids[1], "b", 2, 128, "x:y", inputs=(JobEdge(d1.id, ids[1], S.FORWARD, 0), JobEdge(d2.id, ids[1], S.HASH, 1)))
    graph = ExecutionGraph(JobGraph(JobID.generate(), "j", JobType.BATCH, (a, b)), lambda: 0)
    regions = build_pipelined_regions(graph)
    assert [names(graph, r.vertices) for r in regions] == [["a0", "a1", "b0", "b1"]]


# ---- failover strategies -------------------------------------------------------------------------


def finish(graph: ExecutionGraph, name: str) -> None:
    for v in graph.execution_vertices():
        if f"{v.job_vertex.name}{v.subtask_index}" == name:
            e = v.current_execution
            for s in (ExecutionState.SCHEDULED, ExecutionState.DEPLOYING, ExecutionState.FINISHED):
                graph.transition_execution(e, s)
            graph.mark_finished(e, None)


def deploy(graph: ExecutionGraph, name: str) -> None:
    for v in graph.execution_vertices():
        if f"{v.job_vertex.name}{v.subtask_index}" == name:
            for s in (ExecutionState.SCHEDULED, ExecutionState.DEPLOYING):
                graph.transition_execution(v.current_execution, s)


def vid(graph: ExecutionGraph, name: str) -> object:
    return next(v.id for v in graph.execution_vertices() if f"{v.job_vertex.name}{v.subtask_index}" == name)


def region_strategy(graph: ExecutionGraph) -> RestartPipelinedRegionFailoverStrategy:
    return RestartPipelinedRegionFailoverStrategy(
        build_pipelined_regions(graph),
        lambda p: graph.partitions[p].finished,
        graph.vertex_state,
    )


def test_region_failover_restarts_only_the_failed_consumer_when_inputs_are_available() -> None:
    graph = make_graph([("a", 2), ("b", 2)], [(0, 1, S.HASH, BLOCKING)])
    for n in ("a0", "a1"):
        finish(graph, n)
    deploy(graph, "b0")
    deploy(graph, "b1")
    assert names(graph, region_strategy(graph).tasks_needing_restart(vid(graph, "b0"), None)) == ["b0"]


def test_region_failover_pulls_in_producer_of_a_lost_partition_and_its_consumers() -> None:
    graph = make_graph([("a", 2), ("b", 2)], [(0, 1, S.HASH, BLOCKING)])
    for n in ("a0", "a1"):
        finish(graph, n)
    deploy(graph, "b0")
    deploy(graph, "b1")
    lost = next(p for p in graph.partitions if p.partition_number == 1)
    cause = SerializedError("PartitionNotFoundException", "gone", partition_not_found=str(lost))
    got = region_strategy(graph).tasks_needing_restart(vid(graph, "b0"), cause)
    assert names(graph, got) == ["a1", "b0", "b1"]


def test_region_failover_restarts_consumers_but_not_created_ones() -> None:
    graph = make_graph([("a", 2), ("b", 2), ("c", 1)], [(0, 1, S.FORWARD, BLOCKING), (1, 2, S.HASH, BLOCKING)])
    finish(graph, "a0")
    deploy(graph, "a1")
    finish(graph, "b0")
    # a0 fails: consumer b0 and its consumer c0 are involved; c0's unfinished input (b1) pulls in
    # b1's region and then a1 (input not available). CREATED vertices (c0, b1) are left out.
    assert names(graph, region_strategy(graph).tasks_needing_restart(vid(graph, "a0"), None)) == ["a0", "a1", "b0"]


def test_restart_all() -> None:
    graph = make_graph([("a", 2), ("b", 1)], [(0, 1, S.HASH, BLOCKING)])
    deploy(graph, "a0")
    deploy(graph, "a1")
    got = RestartAllFailoverStrategy(graph, graph.vertex_state).tasks_needing_restart(vid(graph, "a0"), None)
    assert names(graph, got) == ["a0", "a1"]


# ---- restart back-off (time passed in; no sleeping) ---------------------------------------------


def test_no_restart() -> None:
    s = NoRestartBackoffTimeStrategy()
    s.notify_failure(0)
    assert not s.can_restart(0)


def test_fixed_delay_allows_n_restarts() -> None:
    s = FixedDelayRestartBackoffTimeStrategy(attempts=2, delay_s=3)
    results = []
    for t in (0, 10, 20):
        s.notify_failure(t)
        results.append(s.can_restart(t))
    assert results == [True, True, False]
    assert s.backoff_time_s(0) == 3


def test_failure_rate() -> None:
    s = FailureRateRestartBackoffTimeStrategy(max_failures=2, interval_s=10, delay_s=1)
    seen = []
    for t in (0, 1, 2, 30, 31, 45):
        s.notify_failure(t)
        seen.append(s.can_restart(t))
    # third failure within 10 s fails; at 30 the oldest of the last three is 1 -> ok again
    assert seen == [True, True, False, True, True, True]


def test_exponential_delay_docs_example() -> None:
    s = ExponentialDelayRestartBackoffTimeStrategy(1, 10, 2, 3600, 0.0, 2**31 - 1)
    now, delays = 0.0, []
    for _ in range(6):
        assert s.notify_failure(now)
        assert s.can_restart(now)
        delays.append(s.backoff_time_s(now))
        now += delays[-1] + 0.5  # fails again shortly after each restart
    assert delays == [1, 2, 4, 8, 10, 10]


def test_exponential_delay_merges_failures_before_restart_and_resets_after_threshold() -> None:
    s = ExponentialDelayRestartBackoffTimeStrategy(1, 60, 2, 100, 0.0, 3)
    assert s.notify_failure(0) and s.backoff_time_s(0) == 1
    assert not s.notify_failure(0.5)  # before the scheduled restart at 1: same attempt
    assert s.backoff_time_s(0.5) == 0.5
    assert s.notify_failure(2) and s.backoff_time_s(2) == 2
    assert s.notify_failure(5) and s.backoff_time_s(5) == 4
    assert s.can_restart(5)
    assert s.notify_failure(10) and not s.can_restart(10)  # 4th attempt > attempts-before-reset
    assert s.notify_failure(500) and s.backoff_time_s(500) == 1 and s.can_restart(500)


def test_exponential_delay_jitter_stays_within_bounds() -> None:
    for r in (0.0, 0.5, 1.0):
        s = ExponentialDelayRestartBackoffTimeStrategy(1, 60, 2, 3600, 0.1, 10, rng=lambda r=r: r)
        s.notify_failure(0)
        s.notify_failure(5)  # backoff 2 +- 0.2
        assert 1.8 - 1e-9 <= s.backoff_time_s(5) <= 2.2 + 1e-9


@pytest.mark.parametrize(
    ("conf", "kind"),
    [
        ({}, NoRestartBackoffTimeStrategy),
        ({"restart-strategy.type": "none"}, NoRestartBackoffTimeStrategy),
        ({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3"}, FixedDelayRestartBackoffTimeStrategy),
        ({"restart-strategy": "failurerate"}, FailureRateRestartBackoffTimeStrategy),
        ({"restart-strategy.type": "exponential-delay"}, ExponentialDelayRestartBackoffTimeStrategy),
    ],
)
def test_from_configuration(conf: dict[str, str], kind: type) -> None:
    assert isinstance(restart_backoff_from_configuration(Configuration(conf)), kind)


def test_from_configuration_values_and_errors() -> None:
    s = restart_backoff_from_configuration(
        {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
         "restart-strategy.fixed-delay.delay": "250 ms"}
    )
    assert isinstance(s, FixedDelayRestartBackoffTimeStrategy)
    assert (s.attempts, s.delay_s) == (3, 0.25)
    with pytest.raises(IllegalConfigurationException, match="multiplier"):
        restart_backoff_from_configuration(
            {"restart-strategy.type": "exponential-delay",
             "restart-strategy.exponential-delay.backoff-multiplier": "0.5"}
        )
