"""Layer 1: the AdaptiveBatchScheduler turns a hash join into a broadcast join, or splits its
skewed subpartitions, from the bytes its finished inputs stored (Flink FLIP-470), and deploys
subtasks that read accordingly."""

from __future__ import annotations

import dataclasses

from scheduler_driver import Driver, S, deploys, make_job, names

from flintlock.graph.plan import job_graph_plan
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.runtime.scheduler.adaptivebatch.adaptive_batch_scheduler import probe_joins
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


# ---- the join moved into its probe side's producer -------------------------------------------


def _probe_job(how: str = "inner", probe: str = "left", estimate: int = 10_000) -> JobGraph:
    """lineitem (auto, 1 subtask) and orders (1) -> join (auto, up to 4) whose probe is
    lineitem, estimated at ``estimate`` bytes."""
    job = make_job([("lineitem", 1), ("orders", 1), ("join", 4)],
                   [(0, 2, S.HASH), (1, 2, S.HASH)], auto=frozenset({0, 2}),
                   joins={2: how}, probes={2: probe})
    join = dataclasses.replace(job.vertices[2], adaptive_join_probe_bytes=estimate)
    return _with_sources(dataclasses.replace(job, vertices=(*job.vertices[:2], join)), 0)


def _with_sources(job: JobGraph, *indices: int) -> JobGraph:
    """``job`` whose vertices at ``indices`` are sources (a dynamic source without splits runs
    at its largest parallelism) and with its plan."""
    vertices = tuple(dataclasses.replace(v, source="a source") if i in indices else v
                     for i, v in enumerate(job.vertices))
    return dataclasses.replace(job, vertices=vertices,
                               plan=job_graph_plan(job.job_id, job.name, job.job_type, vertices))


def _vertex(d: Driver, name: str):  # type: ignore[no-untyped-def]
    (v,) = [v for v in d.graph.job_vertices.values() if v.name == name]
    return v


def test_the_probe_side_waits_for_the_build_side_and_runs_the_join_when_it_is_small() -> None:
    d = Driver(_probe_job(), adaptive=True, **{VOLUME: "1000", THRESHOLD: "40"})
    d.handle(StartScheduling())
    _, cmds = d.offer(3)
    assert names(deploys(cmds)) == ["orders (1/1)#0"]  # lineitem is held back
    assert not _vertex(d, "lineitem").initialized
    (orders,) = deploys(cmds)
    probes = deploys(d.finish(orders, sizes=(10,) * 4))
    assert [c.tdd.vertex_name for c in probes] == ["lineitem"]
    (probe,) = probes
    pushed = probe.tdd.pushed_join
    assert pushed is not None
    assert (pushed.consumer_name, pushed.consumer_payload, pushed.probe_side, pushed.build_gate) \
        == ("join", b"chain of join", "left", 0)
    assert pushed.output_dataset == probe.tdd.produced_partitions[0].partition_id.dataset_id
    assert _gate(probe, 0) == ((0,), 0, 3)  # the build side whole, as a HASH gate
    assert probe.tdd.input_gates[0].ship_strategy is S.HASH
    # region failover and partition release see lineitem as a consumer of orders' partition
    lineitem = _vertex(d, "lineitem").task_vertices[0]
    (stored,) = _vertex(d, "orders").task_vertices[0].produced_partitions
    assert lineitem.id in stored.consumers
    assert stored.id in d.scheduler.regions.region_of(lineitem.id).consumed_blocking_partitions

    joins = deploys(d.finish(probe, sizes=(300,) * 4))
    joins += deploys(d.offer(2)[1])
    # sized by the joined rows alone (300 a subpartition at 1000 a subtask: 3 + 1)
    assert names(joins) == ["join (1/2)#0", "join (2/2)#0"]
    assert [(c.tdd.pushed_probe_side, c.tdd.broadcast_join_side) for c in joins] == [("left", "")] * 2
    assert [_gate(c, 0) for c in joins] == [((0,), 0, 2), ((0,), 3, 3)]
    assert d.graph.archive().plan["nodes"][2]["operator_strategy"] == (
        "BROADCAST_HASH_JOIN (adaptive, right side 40 bytes, joined in lineitem)")
    for c in joins:
        d.finish(c)
    assert d.graph.state is JobStatus.FINISHED


def test_a_build_side_over_the_threshold_leaves_the_join_where_it_was() -> None:
    d = Driver(_probe_job(), adaptive=True, **{VOLUME: "1000", THRESHOLD: "39"})
    d.handle(StartScheduling())
    _, cmds = d.offer(3)
    (orders,) = deploys(cmds)
    (probe,) = deploys(d.finish(orders, sizes=(10,) * 4))
    assert probe.tdd.pushed_join is None and probe.tdd.input_gates == ()
    joins = deploys(d.finish(probe, sizes=(300,) * 4)) + deploys(d.offer(2)[1])
    assert {c.tdd.pushed_probe_side for c in joins} == {""}
    assert all(len(c.tdd.input_gates) == 2 for c in joins)


def test_a_build_side_too_large_for_the_estimated_probe_side_is_not_moved() -> None:
    """40 bytes read by 1 subtask against 319 estimated: 8 x 40 > 319 (320 would pay)."""
    for estimate, moved in ((319, False), (320, True)):
        d = Driver(_probe_job(estimate=estimate), adaptive=True, **{VOLUME: "1000", THRESHOLD: "40"})
        d.handle(StartScheduling())
        (orders,) = deploys(d.offer(3)[1])
        (probe,) = deploys(d.finish(orders, sizes=(10,) * 4))
        assert (probe.tdd.pushed_join is not None) is moved


def test_no_probe_side_is_held_when_run_time_broadcasts_are_off_or_it_feeds_others() -> None:
    d = Driver(_probe_job(), adaptive=True,
               **{THRESHOLD: "40", "table.optimizer.adaptive-broadcast-join.strategy": "NONE"})
    d.handle(StartScheduling())
    assert sorted(names(deploys(d.offer(3)[1]))) == ["lineitem (1/1)#0", "orders (1/1)#0"]

    job = make_job([("lineitem", 1), ("orders", 1), ("join", 4), ("other", 1)],
                   [(0, 2, S.HASH), (1, 2, S.HASH), (0, 3, S.HASH)], auto=frozenset({0, 2}),
                   joins={2: "inner"}, probes={2: "left"})
    d = Driver(_with_sources(job, 0), adaptive=True, **{THRESHOLD: "40"})
    d.handle(StartScheduling())
    assert sorted(names(deploys(d.offer(3)[1]))) == ["lineitem (1/1)#0", "orders (1/1)#0"]
    assert probe_joins(d.graph, d.scheduler.join_settings) == {}


def _mid_job() -> JobGraph:
    """a -> mid (auto) -> join (auto) <- dims, with either side free to run the join."""
    job = make_job([("a", 1), ("mid", 2), ("dims", 1), ("join", 4)],
                   [(0, 1, S.HASH), (1, 3, S.HASH), (2, 3, S.HASH)], auto=frozenset({1, 3}),
                   joins={3: "inner"}, probes={3: "any"})
    return _with_sources(job)


def test_a_producer_that_starts_after_the_small_side_finished_runs_the_join_unheld() -> None:
    d = Driver(_mid_job(), adaptive=True, **{VOLUME: "1000", THRESHOLD: "40"})
    d.handle(StartScheduling())
    by_name = {c.tdd.vertex_name: c for c in deploys(d.offer(3)[1])}
    assert sorted(by_name) == ["a", "dims"]  # nothing is held: no side was estimated large
    assert deploys(d.finish(by_name["dims"], sizes=(10,) * 4)) == []
    mids = deploys(d.finish(by_name["a"], sizes=(100,) * 2))
    assert [c.tdd.vertex_name for c in mids] == ["mid"]
    pushed = mids[0].tdd.pushed_join
    assert pushed is not None and (pushed.probe_side, pushed.build_gate) == ("left", 1)
    assert _gate(mids[0], 1) == ((0,), 0, 3)
    joins = deploys(d.finish(mids[0], sizes=(100,) * 4))
    assert {c.tdd.pushed_probe_side for c in joins} == {"left"}


def test_a_producer_that_starts_before_the_other_side_finished_leaves_the_join() -> None:
    d = Driver(_mid_job(), adaptive=True, **{VOLUME: "1000", THRESHOLD: "40"})
    d.handle(StartScheduling())
    by_name = {c.tdd.vertex_name: c for c in deploys(d.offer(3)[1])}
    (mid,) = deploys(d.finish(by_name["a"], sizes=(100,) * 2))
    assert mid.tdd.pushed_join is None and len(mid.tdd.input_gates) == 1
    d.finish(by_name["dims"], sizes=(10,) * 4)
    joins = deploys(d.finish(mid, sizes=(100,) * 4))
    assert joins and {c.tdd.pushed_probe_side for c in joins} == {""}
    assert {c.tdd.broadcast_join_side for c in joins} == {"right"}  # decided at the join


def test_a_join_vertex_with_a_further_broadcast_input_still_has_its_probe_side_cut() -> None:
    """TPC-H Q22's shape: the anti join's vertex also reads an average (BROADCAST, crossed
    with the joined rows later in its chain); its head join's right side is still held and
    cut. A further HASH input leaves the join as compiled."""
    def job(third: S) -> JobGraph:
        graph = make_job([("customer", 1), ("orders", 1), ("avg", 1), ("join", 4)],
                         [(0, 3, S.HASH), (1, 3, S.HASH), (2, 3, third)],
                         auto=frozenset({1, 3}), joins={3: "anti"}, probes={3: "right"})
        join = dataclasses.replace(graph.vertices[3], adaptive_join_probe_bytes=10_000)
        return _with_sources(dataclasses.replace(graph, vertices=(*graph.vertices[:3], join)), 1)

    d = Driver(job(S.BROADCAST), adaptive=True, **{VOLUME: "1000", THRESHOLD: "40"})
    assert set(probe_joins(d.graph, d.scheduler.join_settings)) == {_vertex(d, "orders").id}
    d.handle(StartScheduling())
    first = deploys(d.offer(4)[1])
    assert sorted(names(first)) == ["avg (1/1)#0", "customer (1/1)#0"]
    (customer,) = [c for c in first if c.tdd.vertex_name == "customer"]
    (probe,) = deploys(d.finish(customer, sizes=(10,) * 4))
    pushed = probe.tdd.pushed_join
    assert probe.tdd.vertex_name == "orders" and pushed is not None and pushed.reduce_only
    d = Driver(job(S.HASH), adaptive=True, **{VOLUME: "1000", THRESHOLD: "40"})
    assert probe_joins(d.graph, d.scheduler.join_settings) == {}


def test_a_runtime_filter_cuts_a_semi_joins_right_side_to_the_left_sides_keys() -> None:
    """A semi join cannot broadcast its left side; its right side only tells whether a left key
    has a partner, so with table.optimizer.runtime-filter.enabled (the default) its producer
    keeps only rows whose keys the left side has, and the join stays."""
    job = make_job([("orders", 1), ("lineitem", 1), ("join", 4)],
                   [(0, 2, S.HASH), (1, 2, S.HASH)], auto=frozenset({1, 2}),
                   joins={2: "semi"}, probes={2: "right"})
    join = dataclasses.replace(job.vertices[2], adaptive_join_probe_bytes=10_000)
    job = _with_sources(dataclasses.replace(job, vertices=(*job.vertices[:2], join)), 1)
    off = {"table.optimizer.runtime-filter.enabled": "false"}
    d = Driver(job, adaptive=True, **{VOLUME: "1000", THRESHOLD: "40", **off})
    d.handle(StartScheduling())
    assert sorted(names(deploys(d.offer(3)[1]))) == ["lineitem (1/1)#0", "orders (1/1)#0"]
    d = Driver(job, adaptive=True, **{VOLUME: "1000", THRESHOLD: "40"})
    d.handle(StartScheduling())
    (orders,) = deploys(d.offer(3)[1])
    (probe,) = deploys(d.finish(orders, sizes=(10,) * 4))
    pushed = probe.tdd.pushed_join
    assert probe.tdd.vertex_name == "lineitem" and pushed is not None
    assert (pushed.probe_side, pushed.reduce_only, pushed.build_gate) == ("right", True, 0)
    joins = deploys(d.finish(probe, sizes=(50,) * 4)) + deploys(d.offer(2)[1])
    assert joins and {(c.tdd.pushed_probe_side, len(c.tdd.input_gates)) for c in joins} == {("", 2)}
    assert d.graph.archive().plan["nodes"][2]["operator_strategy"] == (
        "HASH_JOIN (right side cut to the keys of the left side, 40 bytes, in lineitem)")
