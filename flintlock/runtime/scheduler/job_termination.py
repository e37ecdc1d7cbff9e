"""What a terminating job leaves to do and to report, read from its ExecutionGraph (pure).

The scheduler core uses these when the job ends: the sink work to commit (FINISHED) or abort
(FAILED/CANCELED), the stored result partitions to release per TaskExecutor (Flink
``JobMasterPartitionTracker.stopTrackingAndReleaseAllPartitions``), and the ``JobResult`` (Flink
``JobResult.createFrom``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from flintlock.runtime.executiongraph.archived import JobResult
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.ids import IntermediateResultPartitionID, ResourceID
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus
from flintlock.runtime.scheduler.accumulators import merge_accumulators

__all__ = ["SinkWork", "create_job_result", "partitions_to_release", "sink_work"]

#: ``(sink, committables in subtask order)`` per sink
SinkWork = tuple[tuple[Any, tuple[Any, ...]], ...]

_APPLICATION_STATUS = {
    JobStatus.FINISHED: "SUCCEEDED",
    JobStatus.FAILED: "FAILED",
    JobStatus.CANCELED: "CANCELED",
}


def sink_work(graph: ExecutionGraph, commit: bool) -> SinkWork:
    """The committables of every sink: of the current attempts to commit, of all to abort.

    A vertex's subtasks number their sinks in chain order: its own, then those of the consumers
    chained into it at run time (which have no subtasks and are skipped)."""
    work: list[tuple[Any, tuple[Any, ...]]] = []
    for ejv in graph.job_vertices.values():
        if ejv.chained_into is not None:
            continue
        for k, sink in enumerate(ejv.sinks()):
            committables: list[Any] = []
            for v in ejv.task_vertices:
                attempts = [v.current_execution] if commit else [*v.prior_executions, v.current_execution]
                for e in attempts:
                    if e.result is not None and k in e.result.committables:
                        committables.append(e.result.committables[k])
            work.append((sink, tuple(committables)))
    return tuple(work)


def partitions_to_release(
    graph: ExecutionGraph, lost_task_managers: Collection[ResourceID] = ()
) -> dict[str, list[IntermediateResultPartitionID]]:
    """TaskExecutor address -> the partitions FINISHED attempts stored there.

    TaskExecutors in ``lost_task_managers`` are left out: the JobMaster stopped tracking their
    partitions when they were lost (Flink ``stopTrackingPartitionsFor``).
    """
    by_address: dict[str, list[IntermediateResultPartitionID]] = {}
    for v in graph.execution_vertices():
        for e in [*v.prior_executions, v.current_execution]:
            if e.state is ExecutionState.FINISHED and e.slot is not None and v.produced_partitions:
                if e.slot.resource_id in lost_task_managers:
                    continue
                ids = by_address.setdefault(e.slot.task_executor_address, [])
                ids.extend(p.id for p in v.produced_partitions if p.id not in ids)
    return by_address


def create_job_result(graph: ExecutionGraph, now_ms: int) -> JobResult:
    """The job's result; the net runtime ends at ``now_ms`` while the job is not terminal."""
    timestamps = graph.state_timestamps
    start = timestamps.get(JobStatus.INITIALIZING, timestamps.get(JobStatus.CREATED, 0))
    end = timestamps.get(graph.state, now_ms)
    finished = [
        e.result.accumulators
        for e in graph.current_executions()
        if e.state is ExecutionState.FINISHED and e.result is not None
    ]
    return JobResult(
        job_id=graph.job_graph.job_id,
        job_name=graph.job_graph.name,
        application_status=_APPLICATION_STATUS.get(graph.state, "UNKNOWN"),
        net_runtime_ms=max(0, end - start),
        accumulator_results=merge_accumulators(finished),
        failure=graph.failure_info if graph.state is JobStatus.FAILED else None,
    )
