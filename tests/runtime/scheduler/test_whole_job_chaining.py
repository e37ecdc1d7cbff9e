"""Layer 1: whole-job chaining in the AdaptiveBatchScheduler (``whole_job_chaining``).

When every vertex of a BATCH job will run one subtask, the whole job runs as one task: the first
source's, with every other vertex chained into it (``TaskDeploymentDescriptor.whole_job``), each
listed with the datasets its gates read and its source's splits. Nothing is written between
them; the sinks are committed once from that task; REST shows every vertex with its subtask.
"""

from __future__ import annotations

import dataclasses

from scheduler_driver import Driver, S, deploys, make_job, names

from flintlock.graph.plan import job_graph_plan
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus
from flintlock.runtime.scheduler.adaptivebatch.whole_job_chaining import (
    one_subtask,
)
from flintlock.runtime.scheduler.messages import FinalizeSinks, SinksFinalized, StartScheduling

RESTART = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "2",
           "restart-strategy.fixed-delay.delay": "1 s"}


def _join_job(join_parallelism: int = 1, **kw: object) -> JobGraph:
    """orders -HASH-> join <-HASH- customer, all three sized at run time (at most 1, 1 and
    ``join_parallelism``); join -GLOBAL-> sort (1, a sink)."""
    job = make_job([("orders", 1), ("customer", 1), ("join", join_parallelism), ("sort", 1)],
                   [(0, 2, S.HASH), (1, 2, S.HASH), (2, 3, S.GLOBAL)], auto=frozenset({0, 1, 2}),
                   sinks={3: ("collect",)}, **kw)
    vertices = tuple(dataclasses.replace(v, source="a source") if i < 2 else v
                     for i, v in enumerate(job.vertices))
    return dataclasses.replace(job, vertices=vertices, plan=job_graph_plan(
        job.job_id, job.name, job.job_type, vertices))


def _by_name(job: JobGraph) -> dict:  # type: ignore[type-arg]
    return {v.name: v for v in job.vertices}


def test_a_job_whose_vertices_all_run_one_subtask_runs_as_one_task() -> None:
    job = _join_job()
    d = Driver(job, adaptive=True)
    d.handle(StartScheduling())
    _, cmds = d.offer(2)
    assert names(cmds) == ["orders (1/1)#0"]  # one slot request, one task
    (task,) = deploys(cmds)
    tdd = task.tdd
    assert tdd.whole_job
    # the JobGraph's (topological) order: both sources before the join, the join before the sort
    assert [c.consumer_name for c in tdd.chained_consumers] == ["customer", "join", "sort"]
    vertices = _by_name(job)
    customer, join, sort = tdd.chained_consumers
    assert customer.input_datasets == ()
    assert join.input_datasets == (vertices["orders"].results[0].id,
                                   vertices["customer"].results[0].id)
    assert sort.input_datasets == (vertices["join"].results[0].id,)
    assert tdd.produced_partitions == () and tdd.input_gates == ()

    cmds = d.finish(task, committables={0: "rows"})
    assert FinalizeSinks(True, (("collect", ("rows",)),)) in cmds
    d.handle(SinksFinalized())
    assert d.graph.state is JobStatus.FINISHED
    archived = d.graph.archive()
    shown = {v.name: (v.parallelism, v.state, tuple(s.attempt_id for s in v.subtasks))
             for v in archived.vertices}
    assert set(shown.values()) == {(1, ExecutionState.FINISHED, (tdd.attempt_id,))}
    strategies = {n["description"]: n.get("operator_strategy", "") for n in archived.plan["nodes"]}
    assert {strategies[n] for n in ("customer", "join", "sort")} == {
        "chained into orders at run time (whole job)"}


def test_a_chained_sources_splits_travel_with_the_task() -> None:
    d = Driver(_join_job(), adaptive=True)
    # a vertex whose parallelism the program set is initialized with the graph: not chained
    static = Driver(make_job([("src", 1), ("sink", 1)], [(0, 1, S.HASH)]), adaptive=True)
    static.handle(StartScheduling())
    assert [c.tdd.whole_job for c in deploys(static.offer(1)[1])] == [False]
    vertices = _by_name(d.graph.job_graph)
    splits = {vertices["orders"].id: [["o-1", "o-2"]], vertices["customer"].id: [["c-1"]]}
    d.handle(StartScheduling(splits=splits))
    (task,) = deploys(d.offer(1)[1])
    assert task.tdd.source_splits == ("o-1", "o-2")
    assert task.tdd.chained_consumers[0].source_splits == ("c-1",)


def test_a_failed_whole_job_task_restarts_whole() -> None:
    d = Driver(_join_job(configuration=RESTART), adaptive=True)
    d.handle(StartScheduling())
    (task,) = deploys(d.offer(1)[1])
    d.report(task.tdd.attempt_id, ExecutionState.FAILED)
    out = d.advance(1.0) + d.offer(1)[1]
    assert names(out) == ["orders (1/1)#1"]
    (again,) = deploys(out)
    assert again.tdd.whole_job and len(again.tdd.chained_consumers) == 3
    d.finish(again)
    d.handle(SinksFinalized())
    assert d.graph.state is JobStatus.FINISHED


def test_a_vertex_that_may_run_two_subtasks_keeps_the_job_apart() -> None:
    d = Driver(_join_job(join_parallelism=2), adaptive=True)
    d.handle(StartScheduling())
    cmds = d.offer(2)[1]
    assert sorted(names(cmds)) == ["customer (1/1)#0", "orders (1/1)#0"]
    assert not any(c.tdd.whole_job for c in deploys(cmds))
    # the cluster's one Spark server bounds the join at one subtask: the whole job is one task
    d = Driver(_join_job(join_parallelism=2), adaptive=True)
    d.scheduler.settings = dataclasses.replace(d.scheduler.settings, cluster_spark_servers=1)
    d.handle(StartScheduling())
    assert names(d.offer(2)[1]) == ["orders (1/1)#0"]


def test_whole_job_chaining_is_off_with_its_keys_or_another_slot_sharing_group() -> None:
    for conf in ({"execution.batch.adaptive.runtime-chaining.whole-job.enabled": "false"},
                 {"execution.batch.adaptive.runtime-chaining.enabled": "false"}):
        d = Driver(_join_job(), adaptive=True, **conf)
        d.handle(StartScheduling())
        assert sorted(names(d.offer(2)[1])) == ["customer (1/1)#0", "orders (1/1)#0"]
    job = _join_job()
    vertices = tuple(dataclasses.replace(v, slot_sharing_group="sorts") if v.name == "sort" else v
                     for v in job.vertices)
    d = Driver(dataclasses.replace(job, vertices=vertices), adaptive=True)
    d.handle(StartScheduling())
    assert sorted(names(d.offer(2)[1])) == ["customer (1/1)#0", "orders (1/1)#0"]


def test_one_subtask_follows_the_schedulers_decisions() -> None:
    d = Driver(_join_job(join_parallelism=4), adaptive=True)
    graph = d.graph
    vertices = _by_name(graph.job_graph)
    assert not one_subtask(graph, {}, lambda jv, upper: upper)  # the join may get 4
    assert one_subtask(graph, {}, lambda jv, upper: 1)
    # a parallelism the program set above one
    job = make_job([("src", 1), ("sink", 2)], [(0, 1, S.HASH)], auto=frozenset({0}))
    assert not one_subtask(Driver(job, adaptive=True).graph, {}, lambda jv, upper: 1)
    # a source sized at run time whose splits were enumerated for two subtasks
    orders = _by_name(graph.job_graph)["orders"]
    assert not one_subtask(graph, {orders.id: [["a"], ["b"]]}, lambda jv, upper: 1)
    assert vertices["join"].parallelism == 4
