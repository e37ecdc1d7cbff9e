"""Which finished subtasks of a BATCH job a new leader keeps (pure; FLIP-383's decision).

The new leader read the job events of the earlier leader(s): ExecutionVertexID -> ``TaskResult``
of each subtask that FINISHED (``highavailability.job_event_store``). A subtask is kept when:

- its event matches the graph (one location per produced partition, for that partition);
- its sinks' committables are still there (``committable_present``), so the final commit can
  publish them;
- each partition it produced is still there (``partition_present``: on shared storage, with its
  files), or every subtask consuming it is kept too (nobody needs to read it again);
- every subtask of its pipelined region is kept (a region is deployed as a whole).

Dropping a subtask can make a producer's missing partition needed again, so the rules are applied
until nothing changes. What is kept is restored as FINISHED before scheduling starts
(``DefaultScheduler.restore_finished``); the rest runs as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from flintlock.runtime.deployment import PartitionLocation
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.executiongraph.failover.pipelined_regions import PipelinedRegions
from flintlock.runtime.ids import ExecutionVertexID
from flintlock.runtime.taskmanager.task_execution_state import TaskResult

__all__ = ["restorable_subtasks"]


def restorable_subtasks(
    graph: ExecutionGraph,
    regions: PipelinedRegions,
    finished: Mapping[ExecutionVertexID, TaskResult],
    partition_present: Callable[[PartitionLocation], bool],
    committable_present: Callable[[ExecutionVertexID, int, object], bool],
) -> dict[ExecutionVertexID, TaskResult]:
    """The recorded subtasks to restore as FINISHED (see the module docstring)."""
    kept: dict[ExecutionVertexID, TaskResult] = {}
    for vertex_id, result in finished.items():
        try:
            produced = graph.produced_partition_ids(vertex_id)
        except KeyError:  # not a subtask of this graph
            continue
        if [p.partition_id for p in result.partitions] != list(produced):
            continue
        if all(committable_present(vertex_id, i, c) for i, c in result.committables.items()):
            kept[vertex_id] = result
    changed = True
    while changed:
        changed = False
        for vertex_id in list(kept):
            if not _still_kept(graph, regions, vertex_id, kept, partition_present):
                del kept[vertex_id]
                changed = True
    return kept


def _still_kept(graph: ExecutionGraph, regions: PipelinedRegions, vertex_id: ExecutionVertexID,
                kept: Mapping[ExecutionVertexID, TaskResult],
                partition_present: Callable[[PartitionLocation], bool]) -> bool:
    if not all(v in kept for v in regions.region_of(vertex_id).vertices):
        return False
    for location in kept[vertex_id].partitions:
        consumers = graph.consumers_of(location.partition_id)
        if not (all(c in kept for c in consumers) or partition_present(location)):
            return False
    return True
