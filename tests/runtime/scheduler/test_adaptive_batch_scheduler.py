"""Layer 1: the AdaptiveBatchScheduler over a dynamic ExecutionGraph, driven with events.

Vertices whose parallelism the program did not set are expanded only once their producers
finished, at a parallelism decided from the bytes the producers reported; producers write as many
subpartitions as the consumer may get subtasks (fact sheet 7.4).
"""

from __future__ import annotations

import dataclasses

import pytest
from scheduler_driver import PIPELINED, Driver, S, deploys, make_job, names

from flintlock.config.configuration import Configuration
from flintlock.graph.plan import job_graph_plan
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.ids import ResourceID
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus, JobType
from flintlock.runtime.scheduler.adaptivebatch.adaptive_batch_scheduler import (
    AutoParallelismSettings,
    dynamic_vertices,
    scheduler_type,
)
from flintlock.runtime.scheduler.messages import StartScheduling, TaskManagerLost

VOLUME = "execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task"
RESTART = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "2",
           "restart-strategy.fixed-delay.delay": "1 s"}


def _vertex(d: Driver, name: str):  # type: ignore[no-untyped-def]
    (ejv,) = [v for v in d.graph.job_vertices.values() if v.name == name]
    return ejv


def _with_plan(job: JobGraph) -> JobGraph:
    return dataclasses.replace(job, plan=job_graph_plan(job.job_id, job.name, job.job_type, job.vertices))


def test_consumer_parallelism_and_ranges_come_from_the_produced_bytes() -> None:
    # src runs at 2 (a source keeps its parallelism); agg may get up to 4 subtasks
    d = Driver(_with_plan(make_job([("src", 2), ("agg", 4)], [(0, 1, S.HASH)], auto=frozenset({1}))),
               adaptive=True, **{VOLUME: "100"})
    d.handle(StartScheduling())
    agg = _vertex(d, "agg")
    assert not agg.initialized and agg.parallelism == -1 and agg.task_vertices == []
    archived = d.graph.archive()
    assert {v.name: (v.parallelism, len(v.subtasks)) for v in archived.vertices} == {
        "src": (2, 2), "agg": (-1, 0)}
    assert [n["parallelism"] for n in archived.plan["nodes"]] == [2, -1]  # as Flink's REST

    _, cmds = d.offer(4)
    src0, src1 = deploys(cmds)
    # producers write one subpartition per possible consumer subtask
    assert [rp.number_of_subpartitions for rp in src0.tdd.produced_partitions] == [4]
    assert deploys(d.finish(src0, sizes=(10, 10, 60, 10))) == []
    assert not agg.initialized  # src1 still runs
    cmds = d.finish(src1, sizes=(10, 10, 60, 10))
    # totals (20, 20, 120, 20) at 100 bytes per subtask: [0,1] [2] [3]
    assert agg.initialized and agg.parallelism == 3
    cmds += d.offer(1)[1]  # the pool kept the two slots the sources used
    assert names(cmds) == ["agg (1/3)#0", "agg (2/3)#0", "agg (3/3)#0"]
    gates = [c.tdd.input_gates[0] for c in deploys(cmds)]
    assert [(g.subpartition_start, g.subpartition_end) for g in gates] == [(0, 1), (2, 2), (3, 3)]
    assert all(len(g.partitions) == 2 for g in gates)
    assert d.scheduler.decisions[agg.id].reason == "balanced by data volume"
    for c in deploys(cmds):
        assert c.tdd.number_of_subtasks == 3
        d.finish(c)
    assert d.graph.state is JobStatus.FINISHED
    assert [n["parallelism"] for n in d.graph.archive().plan["nodes"]] == [2, 3]


def test_small_data_collapses_a_chain_of_vertices_to_one_subtask_each() -> None:
    job = make_job([("src", 2), ("a", 2), ("b", 2)], [(0, 1, S.HASH), (1, 2, S.REBALANCE)],
                   auto=frozenset({1, 2}))
    d = Driver(job, adaptive=True)  # 16 MiB per subtask, 10 bytes per subpartition
    d.handle(StartScheduling())
    _, cmds = d.offer(2)
    for c in deploys(cmds):
        assert c.tdd.produced_partitions[0].number_of_subpartitions == 2
        out = d.finish(c)
    assert names(out) == ["a (1/1)#0"]
    (a,) = deploys(out)
    assert (a.tdd.input_gates[0].subpartition_start, a.tdd.input_gates[0].subpartition_end) == (0, 1)
    out = d.finish(a)
    assert names(out) == ["b (1/1)#0"]
    d.finish(deploys(out)[0])
    assert d.graph.state is JobStatus.FINISHED
    assert {v.name: v.parallelism for v in d.graph.archive().vertices} == {"src": 2, "a": 1, "b": 1}


def test_max_parallelism_option_bounds_the_subpartitions_and_the_decision() -> None:
    d = Driver(make_job([("src", 1), ("agg", 8)], [(0, 1, S.HASH)], auto=frozenset({1})),
               adaptive=True, **{VOLUME: "1", "execution.batch.adaptive.auto-parallelism.max-parallelism": "3"})
    d.handle(StartScheduling())
    _, cmds = d.offer(3)
    (src,) = deploys(cmds)
    assert src.tdd.produced_partitions[0].number_of_subpartitions == 3
    cmds = d.finish(src) + d.offer(2)[1]
    assert names(cmds) == ["agg (1/3)#0", "agg (2/3)#0", "agg (3/3)#0"]


def test_forward_takes_the_producers_parallelism_and_global_gives_one() -> None:
    job = make_job([("src", 3), ("fwd", 2), ("glob", 2)], [(0, 1, S.FORWARD), (1, 2, S.GLOBAL)],
                   auto=frozenset({1, 2}))
    d = Driver(job, adaptive=True)
    d.handle(StartScheduling())
    _, cmds = d.offer(3)
    for c in deploys(cmds):
        assert c.tdd.produced_partitions[0].number_of_subpartitions == 1
        out = d.finish(c)
    # the last source finished: fwd is expanded and every subtask is scheduled, not only the
    # consumer of the source that finished last
    assert names(out) == ["fwd (1/3)#0", "fwd (2/3)#0", "fwd (3/3)#0"]
    assert [c.tdd.input_gates[0].partitions[0].partition_id.partition_number for c in deploys(out)] == [0, 1, 2]
    for c in deploys(out):
        last = d.finish(c)
    assert names(last) == ["glob (1/1)#0"]


def test_the_clusters_spark_servers_bound_the_default_but_not_a_configured_bound() -> None:
    job = make_job([("src", 1), ("agg", 4)], [(0, 1, S.HASH)], auto=frozenset({1}))
    agg = job.vertices[1]
    servers = AutoParallelismSettings(cluster_spark_servers=2)
    # producers still write for the job's parallelism; the decision takes at most the servers
    assert dynamic_vertices(job, servers) == {agg.id: 4}
    assert servers.decided_at_most(agg, 4) == 2
    assert AutoParallelismSettings().decided_at_most(agg, 4) == 4  # servers unknown
    assert AutoParallelismSettings(max_parallelism=3, cluster_spark_servers=2) \
        .decided_at_most(agg, 3) == 3  # the key, when set, is the bound

    d = Driver(job, adaptive=True, **{VOLUME: "1"})  # 1 byte per subtask would give agg 4
    # what the JobMaster learnt from the ResourceManager before scheduling started
    d.scheduler.settings = dataclasses.replace(d.scheduler.settings, cluster_spark_servers=2)
    d.handle(StartScheduling())
    _, cmds = d.offer(4)
    (src,) = deploys(cmds)
    assert src.tdd.produced_partitions[0].number_of_subpartitions == 4
    out = d.finish(src) + d.offer(1)[1]  # the pool kept the slot the source used
    assert names(out) == ["agg (1/2)#0", "agg (2/2)#0"]
    gates = [c.tdd.input_gates[0] for c in deploys(out)]
    assert [(g.subpartition_start, g.subpartition_end) for g in gates] == [(0, 1), (2, 3)]


def test_a_program_set_parallelism_is_kept() -> None:
    d = Driver(make_job([("src", 2), ("fixed", 3)], [(0, 1, S.HASH)]), adaptive=True)
    # nothing to decide: the graph is fully expanded at once, as with the DefaultScheduler
    assert _vertex(d, "fixed").initialized and _vertex(d, "fixed").parallelism == 3
    d.handle(StartScheduling())
    _, cmds = d.offer(3)
    assert [c.tdd.produced_partitions[0].number_of_subpartitions for c in deploys(cmds)] == [3, 3]
    out = [o for c in deploys(cmds) for o in d.finish(c)] + d.offer(1)[1]
    assert names(out) == ["fixed (1/3)#0", "fixed (2/3)#0", "fixed (3/3)#0"]


def test_lost_input_of_a_decided_vertex_reruns_its_producer_and_keeps_the_decision() -> None:
    tm1, tm2 = ResourceID("tm-1"), ResourceID("tm-2")
    d = Driver(make_job([("src", 2), ("agg", 2)], [(0, 1, S.HASH)], auto=frozenset({1}),
                        configuration=RESTART), adaptive=True, **{VOLUME: "10"})
    d.handle(StartScheduling())
    _, c1 = d.offer(1, tm1)
    _, c2 = d.offer(1, tm2)
    (s0,), (s1,) = deploys(c1), deploys(c2)
    d.finish(s0, tm_local=True)
    agg0, agg1 = deploys(d.finish(s1, tm_local=True))
    assert _vertex(d, "agg").parallelism == 2
    d.report(agg0.tdd.attempt_id, ExecutionState.RUNNING)
    d.report(agg1.tdd.attempt_id, ExecutionState.RUNNING)
    d.handle(TaskManagerLost(tm1, "heartbeat timed out"))  # agg0 and src0's partition are gone
    d.report(agg1.tdd.attempt_id, ExecutionState.CANCELED)
    assert d.graph.state is JobStatus.RESTARTING
    cmds = d.advance(1.0)
    assert names(cmds) == ["src (1/2)#1"]
    cmds = d.finish(deploys(cmds)[0], tm_local=True)
    _, more = d.offer(1, ResourceID("tm-3"))
    assert sorted(names(cmds) + names(more)) == ["agg (1/2)#1", "agg (2/2)#1"]
    for c in deploys(cmds) + deploys(more):
        d.finish(c)
    assert d.graph.state is JobStatus.FINISHED and d.graph.number_of_restarts == 1


def test_dynamic_graph_rejects_a_parallelism_an_edge_cannot_take() -> None:
    job = make_job([("src", 2), ("fwd", 2)], [(0, 1, S.FORWARD)], auto=frozenset({1}))
    graph = ExecutionGraph(job, lambda: 0, dynamic_vertices={job.vertices[1].id: 2})
    with pytest.raises(ValueError, match="producer is not initialized|FORWARD"):
        graph.initialize_job_vertex(job.vertices[1].id, 3)
    with pytest.raises(ValueError, match="initialized already"):
        graph.initialize_job_vertex(job.vertices[0].id, 2)


def test_scheduler_type_follows_flinks_rule() -> None:
    batch = make_job([("a", 1), ("b", 1)], [(0, 1, S.HASH)])
    assert scheduler_type(batch, Configuration({"jobmanager.scheduler": "AdaptiveBatch"})) == "AdaptiveBatch"
    assert scheduler_type(batch, Configuration({"jobmanager.scheduler": "Adaptive"})) == "AdaptiveBatch"
    assert scheduler_type(batch, Configuration({"jobmanager.scheduler": "Default"})) == "Default"
    streaming = make_job([("a", 1), ("b", 1)], [(0, 1, S.HASH)])
    streaming = type(streaming)(streaming.job_id, "s", JobType.STREAMING, streaming.vertices)
    assert scheduler_type(streaming, Configuration({"jobmanager.scheduler": "AdaptiveBatch"})) == "Default"
    # unset: Flink's defaults
    assert scheduler_type(batch, Configuration({})) == "AdaptiveBatch"
    assert scheduler_type(streaming, Configuration({})) == "Default"
    pipelined = make_job([("a", 1), ("b", 1)], [(0, 1, S.HASH)], result_type=PIPELINED)
    assert scheduler_type(pipelined, Configuration({})) == "Default"


class SizedSource:
    """A source that infers its parallelism as given and remembers the bound it was offered."""

    def __init__(self, inferred: int) -> None:
        self.inferred = inferred
        self.offered: list[tuple[int, int]] = []

    def infer_parallelism(self, upper_bound: int, data_volume_per_task: int) -> int:
        self.offered.append((upper_bound, data_volume_per_task))
        return self.inferred


def _with_source(job: JobGraph, index: int, source: object) -> JobGraph:
    vertices = list(job.vertices)
    vertices[index] = dataclasses.replace(vertices[index], source=source)
    return dataclasses.replace(job, vertices=tuple(vertices))


def test_a_source_runs_at_the_parallelism_it_infers_from_its_input() -> None:
    source = SizedSource(inferred=2)
    job = _with_source(make_job([("src", 4), ("agg", 4)], [(0, 1, S.HASH)], auto=frozenset({0, 1})),
                       0, source)
    d = Driver(job, adaptive=True, **{VOLUME: "100"})
    src = _vertex(d, "src")
    assert not src.initialized  # expanded when scheduling starts, with its splits
    assert d.scheduler.source_parallelism(job.vertices[0]) == 2
    assert source.offered == [(4, 100)]
    d.handle(StartScheduling({src.id: [["s0"], ["s1"]]}))
    assert src.parallelism == 2
    _, cmds = d.offer(2)
    assert names(cmds) == ["src (1/2)#0", "src (2/2)#0"]
    assert [c.tdd.source_splits for c in deploys(cmds)] == [("s0",), ("s1",)]
    # its consumer may still get up to the job's parallelism of 4
    assert [c.tdd.produced_partitions[0].number_of_subpartitions for c in deploys(cmds)] == [4, 4]


def test_source_bounds_default_source_parallelism_and_inference_clamped() -> None:
    job = _with_source(make_job([("src", 4), ("agg", 4)], [(0, 1, S.HASH)], auto=frozenset({0, 1})),
                       0, SizedSource(inferred=99))
    d = Driver(job, adaptive=True, **{"execution.batch.adaptive.auto-parallelism.default-source-parallelism": "3"})
    assert d.scheduler.source_parallelism(job.vertices[0]) == 3
    fixed = _with_source(make_job([("src", 4), ("agg", 4)], [(0, 1, S.HASH)], auto=frozenset({1})),
                         0, SizedSource(inferred=1))
    assert Driver(fixed, adaptive=True).scheduler.source_parallelism(fixed.vertices[0]) == 4
