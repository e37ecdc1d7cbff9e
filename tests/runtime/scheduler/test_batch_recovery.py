"""Layer 1: batch job recovery in the scheduler core. Which recorded subtasks a new leader keeps
(``restorable_subtasks``), and a scheduler that restores them runs only the rest."""

from __future__ import annotations

import dataclasses

from scheduler_driver import Driver, S, deploys, make_job, names

from flintlock.runtime.deployment import PartitionLocation
from flintlock.runtime.executiongraph.failover.pipelined_regions import build_pipelined_regions
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID, JobVertexID
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus
from flintlock.runtime.scheduler.adaptivebatch.vertex_parallelism_decider import (
    ParallelismAndInputInfos,
)
from flintlock.runtime.scheduler.batch_recovery import restorable_subtasks
from flintlock.runtime.scheduler.messages import FinalizeSinks, SinksFinalized, StartScheduling
from flintlock.runtime.taskmanager.task_execution_state import TaskResult


class RecordingSink:
    def describe(self) -> str:
        return "recording"


def _recorded(d: Driver, name: str, committables: dict[int, object] | None = None,
              ) -> dict[ExecutionVertexID, TaskResult]:
    """What an earlier leader recorded for every subtask of vertex ``name``."""
    out = {}
    for v in d.graph.execution_vertices():
        if v.job_vertex.name != name:
            continue
        attempt = ExecutionAttemptID.generate(v.id, 0)
        out[v.id] = TaskResult(tuple(
            PartitionLocation(p.id, attempt, f"/shuffle/{p.id}", (1,) * p.number_of_subpartitions,
                              (10,) * p.number_of_subpartitions, "k string")
            for p in v.produced_partitions), committables or {})
    return out


def _three_stages(sink: object = None) -> Driver:
    return Driver(make_job([("a", 2), ("b", 2), ("c", 1)], [(0, 1, S.HASH), (1, 2, S.REBALANCE)],
                           sinks={2: (sink,)} if sink is not None else None))


def _names(d: Driver, ids: object) -> list[str]:
    return sorted(f"{d.graph.vertex(v).job_vertex.name}{v.subtask_index}" for v in ids)


def test_a_subtask_is_kept_when_its_outputs_are_there_or_nobody_needs_them() -> None:
    d = _three_stages()
    regions = build_pipelined_regions(d.graph)
    recorded = {**_recorded(d, "a"), **_recorded(d, "b")}
    everywhere = restorable_subtasks(d.graph, regions, recorded, lambda _: True,
                                     lambda *_: True)
    assert _names(d, everywhere) == ["a0", "a1", "b0", "b1"]
    # b1's partition is gone: b1 runs again, and needs a0's and a1's partitions, which are there
    b1 = next(v for v in recorded if _names(d, [v]) == ["b1"])
    gone = {p.partition_id for p in recorded[b1].partitions}
    kept = restorable_subtasks(d.graph, regions, recorded,
                               lambda loc: loc.partition_id not in gone, lambda *_: True)
    assert _names(d, kept) == ["a0", "a1", "b0"]
    # a's partitions are gone too: b1 runs again and needs them, so a runs again as well; b0's
    # own partition is there, so b0 is still kept
    a_parts = {p.partition_id for v, r in recorded.items() if _names(d, [v])[0][0] == "a"
               for p in r.partitions}
    kept = restorable_subtasks(d.graph, regions, recorded,
                               lambda loc: loc.partition_id not in gone | a_parts,
                               lambda *_: True)
    assert _names(d, kept) == ["b0"]
    # a record that does not fit the graph, or whose sink output is gone, is not kept
    c = _recorded(d, "c", {0: "staged-c0"})
    assert restorable_subtasks(d.graph, regions, {**recorded, **c}, lambda _: True,
                               lambda v, i, committable: committable != "staged-c0") == everywhere
    wrong = {v: TaskResult() for v in recorded}  # no partition locations at all
    assert restorable_subtasks(d.graph, regions, wrong, lambda _: True, lambda *_: True) == {}


def test_a_restored_job_runs_only_what_was_not_finished() -> None:
    sink = RecordingSink()
    d = _three_stages(sink)
    d.scheduler.restore_finished({**_recorded(d, "a"), **_recorded(d, "b")})
    d.handle(StartScheduling({d.graph.job_graph.vertices[0].id: [["s0"], ["s1"]]}))
    assert d.graph.state is JobStatus.RUNNING
    _, cmds = d.offer(2)
    assert names(cmds) == ["c (1/1)#0"]  # a and b finished under the earlier leader
    (c0,) = deploys(cmds)
    gate = c0.tdd.input_gates[0]
    assert [p.uri for p in gate.partitions] == [
        f"/shuffle/{p.id}" for v in d.graph.execution_vertices() if v.job_vertex.name == "b"
        for p in v.produced_partitions]  # it reads the restored partitions
    restored = [v.current_execution for v in d.graph.execution_vertices()
                if v.job_vertex.name in ("a", "b")]
    assert all(e.state is ExecutionState.FINISHED for e in restored)
    assert "RECONCILING -> FINISHED" in str(restored[0].story)
    cmds = d.finish(c0, committables={0: "c0"})
    assert FinalizeSinks(True, ((sink, ("c0",)),)) in cmds
    d.handle(SinksFinalized())
    assert d.graph.state is JobStatus.FINISHED


def test_a_job_restored_in_full_goes_straight_to_its_commit() -> None:
    """The earlier leader died while publishing: every subtask is kept and the commit resumes."""
    sink = RecordingSink()
    d = _three_stages(sink)
    d.scheduler.restore_finished({**_recorded(d, "a"), **_recorded(d, "b"),
                                  **_recorded(d, "c", {0: "staged-c0"})})
    cmds = d.handle(StartScheduling({d.graph.job_graph.vertices[0].id: [["s0"], ["s1"]]}))
    assert FinalizeSinks(True, ((sink, ("staged-c0",)),)) in cmds
    assert deploys(cmds) == []
    d.handle(SinksFinalized())
    assert d.graph.state is JobStatus.FINISHED


def test_a_new_leader_rebuilds_the_dynamic_graph_as_decided_and_runs_only_the_rest() -> None:
    """AdaptiveBatchScheduler under batch job recovery: the earlier leader's vertex
    initializations are replayed before its finished subtasks are restored, so a decided
    parallelism and its input ranges survive a JobManager failover."""
    volume = {"execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": "100"}
    job = make_job([("src", 2), ("agg", 4), ("out", 4)], [(0, 1, S.HASH), (1, 2, S.REBALANCE)],
                   auto=frozenset({1, 2}))
    first = Driver(job, adaptive=True, **volume)
    decided: list[tuple[object, object]] = []
    first.scheduler.on_initialized = lambda vertex, decision: decided.append((vertex, decision))
    first.handle(StartScheduling())
    _, cmds = first.offer(4)
    for c in deploys(cmds):
        cmds = first.finish(c, sizes=(10, 10, 60, 10))
    agg = next(v for v in first.graph.job_vertices.values() if v.name == "agg")
    assert agg.parallelism == 3 and [v for v, _ in decided] == [agg.id]  # src was not dynamic
    # the earlier leader dies once agg finished, before it decided "out"
    recorded = {**_recorded(first, "src"), **_recorded(first, "agg")}

    second = Driver(job, adaptive=True, **volume)
    assert second.scheduler.replay_initializations({}, decided) == [agg.id]
    again = next(v for v in second.graph.job_vertices.values() if v.name == "agg")
    assert again.parallelism == 3
    assert second.scheduler.decisions[agg.id] == first.scheduler.decisions[agg.id]
    regions = second.scheduler.regions
    kept = restorable_subtasks(second.graph, regions, recorded, lambda _: True, lambda *_: True)
    assert _names(second, kept) == ["agg0", "agg1", "agg2", "src0", "src1"]
    second.scheduler.restore_finished(kept)
    second.handle(StartScheduling())
    _, cmds = second.offer(4)
    # only "out" runs, decided now from agg's recorded sizes (3 x 4 x 10 bytes, 100 per subtask)
    assert names(cmds) == ["out (1/2)#0", "out (2/2)#0"]


def test_replay_stops_at_a_decision_that_no_longer_fits() -> None:
    job = make_job([("src", 2), ("agg", 4)], [(0, 1, S.HASH)], auto=frozenset({1}))
    d = Driver(job, adaptive=True)
    agg = next(v for v in d.graph.job_vertices.values() if v.name == "agg")
    unknown = JobVertexID.generate()
    decision = ParallelismAndInputInfos(2, ((0, 1), (2, 3)))
    assert d.scheduler.replay_initializations({}, [(unknown, decision), (agg.id, decision)]) == []
    assert not agg.initialized  # decided anew once src finished
    assert d.scheduler.replay_initializations({}, [(agg.id, ParallelismAndInputInfos(
        9, ()))]) == []  # more subtasks than the producers wrote subpartitions for


def test_a_sink_vertex_is_fully_recorded_only_with_every_subtask_and_committable() -> None:
    from flintlock.runtime.highavailability.job_event_store import VertexInitialization
    from flintlock.runtime.jobmaster.batch_recovery import BatchJobEvents, RecordedBatchJob

    d = _three_stages()
    c = next(v for v in d.graph.job_graph.vertices if v.name == "c")
    finished = _recorded(d, "c", {0: "staged"})
    (c0,) = finished
    complete = RecordedBatchJob([], finished, {}, {(c0, 0): True})
    assert BatchJobEvents.fully_recorded(complete, c)  # sized by the program: 1 subtask
    assert not BatchJobEvents.fully_recorded(
        RecordedBatchJob([], finished, {}, {(c0, 0): False}), c)  # its staged output is gone
    # sized at run time: by its recorded decision (2 subtasks, one recorded)
    sized = dataclasses.replace(c, parallelism_configured=False)
    decided = VertexInitialization(c.id, ParallelismAndInputInfos(2, ()))
    assert not BatchJobEvents.fully_recorded(
        RecordedBatchJob([decided], finished, {}, {(c0, 0): True}), sized)
    assert not BatchJobEvents.fully_recorded(complete, sized)  # no decision recorded
