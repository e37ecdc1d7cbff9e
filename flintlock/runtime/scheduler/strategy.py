"""PipelinedRegionSchedulingStrategy: which regions to deploy, and when (pure).

Follows Flink ``PipelinedRegionSchedulingStrategy`` (fact sheet 7.2): at start, schedule every
region with no external non-pipelined consumed partition (source regions); a region becomes
schedulable once all partitions it consumes through BLOCKING edges are fully produced; when a task
FINISHES, its consumer regions are checked; after a restart the restarted regions are unmarked and
checked again. Regions are returned in topological order. Each returned ``ScheduleRegion`` is one
bulk for slot allocation and deployment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from flintlock.runtime.executiongraph.failover.pipelined_regions import (
    PipelinedRegion,
    PipelinedRegions,
)
from flintlock.runtime.ids import ExecutionVertexID, IntermediateResultPartitionID

__all__ = ["PipelinedRegionSchedulingStrategy", "ScheduleRegion"]


@dataclass(frozen=True)
class ScheduleRegion:
    """Command: allocate slots for, and deploy, all vertices of ``region`` (one bulk)."""

    region: PipelinedRegion

    @property
    def vertices(self) -> tuple[ExecutionVertexID, ...]:
        return self.region.vertices


class PipelinedRegionSchedulingStrategy:
    """Region-at-a-time scheduling for BATCH jobs (eager-equivalent for all-pipelined jobs).

    Args:
        regions: the job's pipelined regions.
        partition_finished: whether a partition is fully produced (its producer FINISHED).
    """

    def __init__(
        self,
        regions: PipelinedRegions,
        partition_finished: Callable[[IntermediateResultPartitionID], bool],
    ) -> None:
        self.regions = regions
        self.partition_finished = partition_finished
        #: indices of regions scheduled (and not restarted since)
        self.scheduled: set[int] = set()

    def _schedulable(self, region: PipelinedRegion) -> bool:
        return region.index not in self.scheduled and all(
            self.partition_finished(p) for p in region.consumed_blocking_partitions
        )

    def _schedule(self, candidates: Iterable[PipelinedRegion]) -> list[ScheduleRegion]:
        out: list[ScheduleRegion] = []
        for region in sorted({r.index: r for r in candidates}.values(), key=lambda r: r.index):
            if self._schedulable(region):
                self.scheduled.add(region.index)
                out.append(ScheduleRegion(region))
        return out

    def start_scheduling(self) -> list[ScheduleRegion]:
        """The source regions (no external blocking inputs)."""
        return self._schedule(r for r in self.regions if not r.consumed_blocking_partitions)

    def schedule_added_regions(self, regions: Iterable[PipelinedRegion]) -> list[ScheduleRegion]:
        """Regions a dynamic graph just added (AdaptiveBatchScheduler): those whose blocking
        inputs are all produced."""
        return self._schedule(regions)

    def on_execution_finished(self, vertex_id: ExecutionVertexID) -> list[ScheduleRegion]:
        """A subtask FINISHED: consumer regions whose blocking inputs are now all produced."""
        return self._schedule(self.regions.consumer_regions(self.regions.region_of(vertex_id)))

    def restart_tasks(self, vertex_ids: Iterable[ExecutionVertexID]) -> list[ScheduleRegion]:
        """The given vertices were reset to new attempts: reschedule their regions when ready."""
        restarted = {self.regions.region_of(v).index: self.regions.region_of(v) for v in vertex_ids}
        self.scheduled -= set(restarted)
        return self._schedule(restarted.values())

    def validate(self) -> None:
        for i in self.scheduled:
            assert 0 <= i < len(self.regions), f"unknown scheduled region {i}"
