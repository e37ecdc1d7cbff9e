"""Layer 1: the AdaptiveBatchScheduler turns a hash join into a broadcast join, or splits its
skewed subpartitions, from the bytes its finished inputs stored (Flink FLIP-470), and deploys
subtasks that read accordingly."""

from __future__ import annotations

import dataclasses

from scheduler_driver import Driver, S, deploys, make_job, names

from flintlock.graph.plan import job_graph_plan
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.runtime.scheduler.messages import StartScheduling

VOLUME = "execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task"
THRESHOLD = "table.optimizer.join.broadcast-threshold"


def _join_job(left: tuple[str, int], right: tuple[str, int], how: str = "inner") -> JobGraph:
    job = make_job([left, right, ("join", 4)], [(0, 2, S.HASH), (1, 2, S.HASH)],
                   auto=frozenset({2}), joins={2: how})
    return dataclasses.replace(job, plan=job_graph_plan(job.job_id, job.name, job.job_type, job.vertices))


def _run_inputs(d: Driver, slots: int, sizes: dict[str, tuple[int, ...]]) -> list:  # type: ignore[type-arg]
    """Deploy and finish the two producers; return the join's deployments."""
    d.handle(StartScheduling())
    _, cmds = d.offer(slots)
    out = []
    for c in deploys(cmds):
        out += d.finish(c, sizes=sizes[c.tdd.vertex_name])
    if slots < 4:  # the join may get 4 subtasks
        out += d.offer(4 - slots)[1]
    return deploys(out)


def _gate(c, index: int) -> tuple[tuple[int, ...], int, int]:  # type: ignore[no-untyped-def]
    g = c.tdd.input_gates[index]
    return (tuple(p.partition_id.partition_number for p in g.partitions),
            g.subpartition_start, g.subpartition_end)


def test_a_side_that_stored_less_than_the_threshold_is_broadcast() -> None:
    d = Driver(_join_job(("orders", 2), ("nation", 1)), adaptive=True,
               **{VOLUME: "1000", THRESHOLD: "40"})
    joins = _run_inputs(d, 3, {"orders": (300,) * 4, "nation": (10,) * 4})
    assert names(joins) == [f"join ({i}/4)#0" for i in range(1, 5)]
    for k, c in enumerate(joins):
        assert c.tdd.broadcast_join_side == "right"
        assert _gate(c, 0) == ((0, 1), k, k)     # the probe side by range
        assert _gate(c, 1) == ((0,), 0, 3)       # the build side whole
    (join,) = [v for v in d.graph.job_vertices.values() if v.name == "join"]
    assert d.scheduler.decisions[join.id].reason.startswith(
        "adaptive broadcast join: the right side stored 40 bytes")
    node = d.graph.archive().plan["nodes"][2]
    assert node["parallelism"] == 4
    assert node["operator_strategy"] == "BROADCAST_HASH_JOIN (adaptive, right side 40 bytes)"
    for c in joins:
        d.finish(c)
    assert d.graph.state is JobStatus.FINISHED


def test_a_side_one_byte_over_the_threshold_stays_hash_partitioned() -> None:
    d = Driver(_join_job(("orders", 2), ("nation", 1)), adaptive=True,
               **{VOLUME: "1000", THRESHOLD: "39"})
    joins = _run_inputs(d, 3, {"orders": (300,) * 4, "nation": (10,) * 4})
    # (600 + 10) bytes per subpartition at 1000 per subtask: one subpartition each
    assert [(_gate(c, 0), _gate(c, 1)) for c in joins] == [
        (((0, 1), k, k), ((0,), k, k)) for k in range(4)]
    assert {c.tdd.broadcast_join_side for c in joins} == {""}
    assert d.graph.archive().plan["nodes"][2]["operator_strategy"] == ""


def test_a_vertex_without_an_adaptive_join_is_never_broadcast() -> None:
    job = make_job([("a", 2), ("b", 1), ("union", 4)], [(0, 2, S.HASH), (1, 2, S.HASH)],
                   auto=frozenset({2}))
    d = Driver(job, adaptive=True, **{VOLUME: "1000", THRESHOLD: "40"})
    joins = _run_inputs(d, 3, {"a": (300,) * 4, "b": (10,) * 4})
    assert [_gate(c, 1) for c in joins] == [((0,), k, k) for k in range(4)]


def test_a_skewed_subpartition_is_split_across_subtasks_by_producer() -> None:
    d = Driver(_join_job(("facts", 4), ("dim", 2)), adaptive=True, **{
        VOLUME: "1000", THRESHOLD: "-1",
        "table.optimizer.skewed-join-optimization.skewed-threshold": "100"})
    joins = _run_inputs(d, 6, {"facts": (10, 400, 10, 10), "dim": (10,) * 4})
    assert [(_gate(c, 0), _gate(c, 1)) for c in joins] == [
        (((0, 1, 2, 3), 0, 0), ((0, 1), 0, 0)),
        (((0, 1), 1, 1), ((0, 1), 1, 1)),
        (((2, 3), 1, 1), ((0, 1), 1, 1)),
        (((0, 1, 2, 3), 2, 3), ((0, 1), 2, 3)),
    ]
    assert d.graph.archive().plan["nodes"][2]["operator_strategy"] == (
        "HASH_JOIN (skewed subpartitions split: 1 (left, 2 subtasks))")
    # a facts partition is consumed only by the subtasks that read it
    facts = d.graph.results[joins[0].tdd.input_gates[0].dataset_id]
    assert [len(p.consumers) for p in facts.partitions] == [3, 3, 3, 3]
    for c in joins:
        d.finish(c)
    assert d.graph.state is JobStatus.FINISHED


def test_skew_optimization_none_keeps_plain_ranges() -> None:
    d = Driver(_join_job(("facts", 4), ("dim", 2)), adaptive=True, **{
        VOLUME: "1000", THRESHOLD: "-1",
        "table.optimizer.skewed-join-optimization.strategy": "NONE",
        "table.optimizer.skewed-join-optimization.skewed-threshold": "100"})
    joins = _run_inputs(d, 6, {"facts": (10, 400, 10, 10), "dim": (10,) * 4})
    assert [_gate(c, 0) for c in joins] == [((0, 1, 2, 3), 0, 0), ((0, 1, 2, 3), 1, 1),
                                            ((0, 1, 2, 3), 2, 3)]
