"""Layer 1: batch job recovery in the scheduler core. Which recorded subtasks a new leader keeps
(``restorable_subtasks``), and a scheduler that restores them runs only the rest."""

from __future__ import annotations

from scheduler_driver import Driver, S, deploys, make_job, names

from flintlock.runtime.deployment import PartitionLocation
from flintlock.runtime.executiongraph.failover.pipelined_regions import build_pipelined_regions
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus
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
