"""Failover strategies: which subtasks restart after a task failure (pure).

Follows Flink ``FailoverStrategy.getTasksNeedingRestart`` with ``RestartAllFailoverStrategy``
(``jobmanager.execution.failover-strategy: full``) and ``RestartPipelinedRegionFailoverStrategy``
(``region``, the default; fact sheet 5.3): starting at the failed task's region, every region whose
consumed partition is unavailable pulls in its producer region, and every consumer region of an
involved region is involved too. Vertices still in CREATED are left out (nothing to restart).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

from flintlock.runtime.executiongraph.failover.pipelined_regions import (
    PipelinedRegion,
    PipelinedRegions,
    SchedulingTopology,
)
from flintlock.runtime.ids import ExecutionVertexID, IntermediateResultPartitionID
from flintlock.runtime.jobgraph.types import ExecutionState
from flintlock.runtime.taskmanager.task_execution_state import SerializedError

__all__ = [
    "FailoverStrategy",
    "RestartAllFailoverStrategy",
    "RestartPipelinedRegionFailoverStrategy",
    "failover_strategy_for",
]

PartitionAvailability = Callable[[IntermediateResultPartitionID], bool]
VertexState = Callable[[ExecutionVertexID], ExecutionState]


class FailoverStrategy(Protocol):
    def tasks_needing_restart(
        self, vertex_id: ExecutionVertexID, cause: SerializedError | None
    ) -> set[ExecutionVertexID]:
        """The execution vertices to restart because ``vertex_id`` failed with ``cause``."""
        ...


class RestartAllFailoverStrategy:
    """Restart every subtask of the job."""

    def __init__(self, topology: SchedulingTopology, vertex_state: VertexState | None = None) -> None:
        self.topology = topology
        self.vertex_state = vertex_state

    def tasks_needing_restart(
        self, vertex_id: ExecutionVertexID, cause: SerializedError | None
    ) -> set[ExecutionVertexID]:
        out = set(self.topology.execution_vertex_ids())
        if self.vertex_state is not None:
            out = {v for v in out if self.vertex_state(v) is not ExecutionState.CREATED}
        return out


class RestartPipelinedRegionFailoverStrategy:
    """Restart the failed region, producers of lost inputs, and all downstream consumer regions.

    Args:
        regions: the job's pipelined regions.
        partition_available: whether a (finished) partition can still be read; pipelined partitions
            are never available (they cannot be re-consumed).
        vertex_state: current state of a vertex (CREATED vertices are left out); optional.
    """

    def __init__(
        self,
        regions: PipelinedRegions,
        partition_available: PartitionAvailability,
        vertex_state: VertexState | None = None,
    ) -> None:
        self.regions = regions
        self.partition_available = partition_available
        self.vertex_state = vertex_state

    def _available(self, p: IntermediateResultPartitionID, failed: set[IntermediateResultPartitionID]) -> bool:
        topology = self.regions.topology
        if p in failed or not topology.partition_type(p).is_reconsumable():
            return False
        return self.partition_available(p)

    def _failed_partitions(self, cause: SerializedError | None) -> set[IntermediateResultPartitionID]:
        """A PartitionNotFound names a partition (``str(IntermediateResultPartitionID)``)."""
        if cause is None or not cause.partition_not_found:
            return set()
        text = cause.partition_not_found
        return {
            p
            for v in self.regions.topology.execution_vertex_ids()
            for p in self.regions.topology.produced_partition_ids(v)
            if str(p) in text
        }

    def regions_needing_restart(
        self, vertex_id: ExecutionVertexID, cause: SerializedError | None
    ) -> list[PipelinedRegion]:
        failed = self._failed_partitions(cause)
        topology = self.regions.topology
        start = self.regions.region_of(vertex_id)
        involved: dict[int, PipelinedRegion] = {start.index: start}
        queue: deque[PipelinedRegion] = deque([start])
        while queue:
            region = queue.popleft()
            related: list[PipelinedRegion] = []
            for v in region.vertices:
                for p in topology.consumed_partition_ids(v):
                    producer_region = self.regions.producer_region(p)
                    if producer_region.index == region.index:
                        continue
                    if not self._available(p, failed):
                        related.append(producer_region)
            related.extend(self.regions.consumer_regions(region))
            for r in related:
                if r.index not in involved:
                    involved[r.index] = r
                    queue.append(r)
        return [involved[i] for i in sorted(involved)]

    def tasks_needing_restart(
        self, vertex_id: ExecutionVertexID, cause: SerializedError | None
    ) -> set[ExecutionVertexID]:
        out = {v for r in self.regions_needing_restart(vertex_id, cause) for v in r.vertices}
        if self.vertex_state is not None:
            out = {v for v in out if self.vertex_state(v) is not ExecutionState.CREATED}
        return out


def failover_strategy_for(
    name: str,
    regions: PipelinedRegions,
    partition_available: PartitionAvailability,
    vertex_state: VertexState | None = None,
) -> FailoverStrategy:
    """``jobmanager.execution.failover-strategy``: ``"region"`` (default) or ``"full"``."""
    if name == "full":
        return RestartAllFailoverStrategy(regions.topology, vertex_state)
    return RestartPipelinedRegionFailoverStrategy(regions, partition_available, vertex_state)
