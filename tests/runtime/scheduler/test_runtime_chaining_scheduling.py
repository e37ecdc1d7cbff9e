"""Layer 1: runtime chaining in the AdaptiveBatchScheduler (``runtime_chaining``).

A vertex that runs one subtask takes a consumer that also runs one subtask and reads only it
into its chain: one task runs both (``TaskDeploymentDescriptor.chained_consumers``) and produces
the consumer's results; the consumer shows that task's subtask and the decision in the plan.
"""

from __future__ import annotations

import dataclasses

from scheduler_driver import Driver, S, deploys, make_job, names

from flintlock.graph.plan import job_graph_plan
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus
from flintlock.runtime.scheduler.messages import FinalizeSinks, SinksFinalized, StartScheduling

RESTART = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "2",
           "restart-strategy.fixed-delay.delay": "1 s"}


def _with_plan(job: JobGraph) -> JobGraph:
    return dataclasses.replace(job, plan=job_graph_plan(job.job_id, job.name, job.job_type, job.vertices))


def _vertex(d: Driver, name: str):  # type: ignore[no-untyped-def]
    (ejv,) = [v for v in d.graph.job_vertices.values() if v.name == name]
    return ejv


def _tail_job(**kw: object) -> JobGraph:
    """src (2) -HASH-> agg (sized at run time) -GLOBAL-> merge (sized) -FORWARD-> sort (1)."""
    return _with_plan(make_job(
        [("src", 2), ("agg", 2), ("merge", 2), ("sort", 1)],
        [(0, 1, S.HASH), (1, 2, S.GLOBAL), (2, 3, S.FORWARD)], auto=frozenset({1, 2}), **kw))


def _run_sources(d: Driver) -> list:  # type: ignore[type-arg]
    d.handle(StartScheduling())
    _, cmds = d.offer(2)
    out = []
    for c in deploys(cmds):
        out = d.finish(c)
    return out


def test_one_subtask_consumers_run_in_their_producers_task() -> None:
    d = Driver(_tail_job(sinks={3: ("sort-sink",)}), adaptive=True)
    out = _run_sources(d)
    # agg is sized at 1 (10 bytes); merge (GLOBAL) and sort (parallelism 1) join its chain
    assert names(out) == ["agg (1/1)#0"]
    (agg,) = deploys(out)
    chained = agg.tdd.chained_consumers
    assert [c.consumer_name for c in chained] == ["merge", "sort"]
    assert [c.consumer_payload for c in chained] == [b"chain of merge", b"chain of sort"]
    job = d.graph.job_graph
    by_name = {v.name: v for v in job.vertices}
    # each reads the output of the chain so far: agg's dataset, then merge's
    assert chained[0].input_dataset == by_name["agg"].results[0].id
    assert chained[1].input_dataset == by_name["merge"].results[0].id
    assert agg.tdd.produced_partitions == ()  # sort only has a sink
    merge, sort = _vertex(d, "merge"), _vertex(d, "sort")
    assert merge.initialized and merge.parallelism == 1 and merge.task_vertices == []
    assert sort.chained_into is _vertex(d, "agg")

    cmds = d.finish(agg, committables={0: "sort's staged files"})
    # the chained sink is committed once, with what the task that ran it staged
    assert FinalizeSinks(True, (("sort-sink", ("sort's staged files",)),)) in cmds
    d.handle(SinksFinalized())
    assert d.graph.state is JobStatus.FINISHED
    archived = d.graph.archive()
    shown = {v.name: (v.parallelism, v.state, [s.attempt_id for s in v.subtasks])
             for v in archived.vertices}
    attempt = agg.tdd.attempt_id
    assert shown["merge"] == shown["sort"] == (1, ExecutionState.FINISHED, [attempt])
    strategies = {n["description"]: n.get("operator_strategy", "") for n in archived.plan["nodes"]}
    assert strategies["merge"] == strategies["sort"] == "chained into agg at run time"


def test_a_chained_consumers_results_are_produced_by_its_producer() -> None:
    # agg -GLOBAL-> merge -HASH-> out (2): merge joins agg's task and writes for out
    job = _with_plan(make_job([("src", 2), ("agg", 2), ("merge", 2), ("out", 2)],
                              [(0, 1, S.HASH), (1, 2, S.GLOBAL), (2, 3, S.HASH)],
                              auto=frozenset({1, 2})))
    d = Driver(job, adaptive=True)
    (agg,) = deploys(_run_sources(d))
    assert [c.consumer_name for c in agg.tdd.chained_consumers] == ["merge"]
    merge_out = {v.name: v for v in job.vertices}["merge"].results[0].id
    assert [p.partition_id.dataset_id for p in agg.tdd.produced_partitions] == [merge_out]
    assert agg.tdd.produced_partitions[0].number_of_subpartitions == 2
    out = d.finish(agg) + d.offer(1)[1]
    assert names(out) == ["out (1/2)#0", "out (2/2)#0"]
    for c in deploys(out):
        gate = c.tdd.input_gates[0]
        assert gate.dataset_id == merge_out
        assert gate.partitions[0].producer_attempt == agg.tdd.attempt_id


def test_a_failed_chained_task_restarts_with_its_consumers() -> None:
    d = Driver(_tail_job(configuration=RESTART), adaptive=True)
    (agg,) = deploys(_run_sources(d))
    d.report(agg.tdd.attempt_id, ExecutionState.FAILED)
    out = d.advance(1.0)
    out += d.offer(1)[1]
    assert names(out) == ["agg (1/1)#1"]
    assert [c.consumer_name for c in deploys(out)[0].tdd.chained_consumers] == ["merge", "sort"]
    d.finish(deploys(out)[0])
    assert d.graph.state is JobStatus.FINISHED


def test_consumers_that_may_run_more_subtasks_or_read_more_inputs_stay_apart() -> None:
    # agg -HASH-> keyed (sized by bytes agg has not produced yet); a two-input join
    job = _with_plan(make_job(
        [("src", 2), ("agg", 2), ("keyed", 2), ("other", 1), ("join", 1)],
        [(0, 1, S.HASH), (1, 2, S.HASH), (2, 4, S.HASH), (3, 4, S.HASH)],
        auto=frozenset({1, 2})))
    d = Driver(job, adaptive=True)
    d.handle(StartScheduling())
    _, cmds = d.offer(3)
    out = []
    for c in deploys(cmds):
        if c.tdd.vertex_name == "src":
            out = d.finish(c)
    (agg,) = deploys(out)
    assert agg.tdd.chained_consumers == ()
    # keyed runs one subtask, but its consumer joins it with another input
    (keyed,) = deploys(d.finish(agg))
    assert keyed.tdd.vertex_name == "keyed" and keyed.tdd.chained_consumers == ()


def test_a_producer_with_two_subtasks_or_another_slot_sharing_group_keeps_its_consumer() -> None:
    job = make_job([("src", 2), ("agg", 2), ("sort", 1)], [(0, 1, S.FORWARD), (1, 2, S.GLOBAL)],
                   auto=frozenset({1}))
    d = Driver(job, adaptive=True)
    d.handle(StartScheduling())
    _, cmds = d.offer(2)
    out = [o for c in deploys(cmds) for o in d.finish(c)]
    assert sorted(names(out)) == ["agg (1/2)#0", "agg (2/2)#0"]  # FORWARD: the source's 2
    assert all(c.tdd.chained_consumers == () for c in deploys(out))

    job = _tail_job()
    vertices = tuple(dataclasses.replace(v, slot_sharing_group="sorts") if v.name == "sort" else v
                     for v in job.vertices)
    d = Driver(dataclasses.replace(job, vertices=vertices), adaptive=True)
    (agg,) = deploys(_run_sources(d))
    assert [c.consumer_name for c in agg.tdd.chained_consumers] == ["merge"]


def test_runtime_chaining_is_off_with_its_key_or_with_operator_chaining() -> None:
    for conf in ({"execution.batch.adaptive.runtime-chaining.enabled": "false"},
                 {"pipeline.operator-chaining.enabled": "false"}):
        d = Driver(_tail_job(), adaptive=True, **conf)
        (agg,) = deploys(_run_sources(d))
        assert agg.tdd.chained_consumers == ()
        assert names(d.finish(agg)) == ["merge (1/1)#0"]
