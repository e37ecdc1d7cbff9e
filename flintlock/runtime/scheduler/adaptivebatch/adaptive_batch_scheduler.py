"""AdaptiveBatchScheduler: a DefaultScheduler over a dynamic ExecutionGraph (pure).

Follows Flink ``AdaptiveBatchScheduler`` (fact sheet 7.4): a BATCH job's vertices whose parallelism
the program did not set (``JobVertex.parallelism_configured`` false) are expanded into subtasks
only once every producer vertex FINISHED; their parallelism and the subpartition range each
subtask reads come from the bytes the producers stored
(``vertex_parallelism_decider``). Their producers write as many subpartitions as the consumer may
get subtasks (``execution.batch.adaptive.auto-parallelism.max-parallelism``, by default the job's
parallelism, at most the consumer's max parallelism): HASH rows land by key group, so a
contiguous range of subpartitions is a contiguous key-group range. Sources and vertices with a
parallelism set by the program run at it. Each new subtask is its own pipelined region (all edges
are BLOCKING); scheduling, slot sharing and failover are the DefaultScheduler's.

Rules for edges into an automatically sized vertex: FORWARD takes the producer's parallelism
(Flink's forward groups), GLOBAL gives 1, RESCALE at most the producer's, BROADCAST inputs are
read whole and count against at most half a subtask's data volume.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from flintlock.config import options
from flintlock.config.batch_execution_options import (
    AUTO_PARALLELISM_AVG_DATA_VOLUME_PER_TASK,
    AUTO_PARALLELISM_ENABLED,
    AUTO_PARALLELISM_MAX,
    AUTO_PARALLELISM_MIN,
)
from flintlock.config.configuration import Configuration
from flintlock.runtime.executiongraph.execution import Execution
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.executiongraph.execution_vertex import ExecutionJobVertex
from flintlock.runtime.ids import ExecutionVertexID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import JobType, ShipStrategy
from flintlock.runtime.scheduler.adaptivebatch.vertex_parallelism_decider import (
    BlockingInputInfo,
    ParallelismAndInputInfos,
    decide_parallelism_and_input_infos,
)
from flintlock.runtime.scheduler.default_scheduler import DefaultScheduler

__all__ = [
    "AdaptiveBatchScheduler",
    "AutoParallelismSettings",
    "adaptive_batch_unsupported",
    "dynamic_vertices",
    "scheduler_type",
]

log = logging.getLogger(__name__)

_ALL_TO_ALL = (ShipStrategy.HASH, ShipStrategy.REBALANCE)


@dataclass(frozen=True)
class AutoParallelismSettings:
    """``execution.batch.adaptive.auto-parallelism.*`` (bytes for the data volume)."""

    enabled: bool = True
    min_parallelism: int = 1
    #: None: each vertex's default (the job's) parallelism
    max_parallelism: int | None = None
    avg_data_volume_per_task: int = 16 << 20

    @classmethod
    def from_configuration(cls, configuration: Configuration) -> AutoParallelismSettings:
        return cls(
            enabled=configuration.get(AUTO_PARALLELISM_ENABLED),
            min_parallelism=configuration.get(AUTO_PARALLELISM_MIN),
            max_parallelism=configuration.get(AUTO_PARALLELISM_MAX),
            avg_data_volume_per_task=configuration.get(AUTO_PARALLELISM_AVG_DATA_VOLUME_PER_TASK),
        )

    def vertex_max_parallelism(self, vertex: JobVertex) -> int:
        """The most subtasks ``vertex`` may get: the configured bound, else its default
        (the job's) parallelism; never above its max parallelism (key groups)."""
        wanted = self.max_parallelism if self.max_parallelism is not None else vertex.parallelism
        return max(1, min(wanted, vertex.max_parallelism))


def scheduler_type(job_graph: JobGraph, configuration: Configuration) -> str:
    """``Default`` or ``AdaptiveBatch`` for this job (Flink
    ``DefaultSlotPoolServiceSchedulerFactory.getSchedulerType``): ``jobmanager.scheduler`` when
    set (``Adaptive`` for a BATCH job means AdaptiveBatch, for a STREAMING job Default, since
    flintlock has no reactive AdaptiveScheduler); unset: AdaptiveBatch for BATCH jobs, Default
    for STREAMING ones. A BATCH job the AdaptiveBatchScheduler cannot run (see
    ``adaptive_batch_unsupported``) runs on the DefaultScheduler, with a log line saying why."""
    configured = configuration.get(options.SCHEDULER)
    batch = job_graph.job_type is JobType.BATCH
    if not batch:
        return "Default"
    wanted = "AdaptiveBatch" if configured in (None, "Adaptive", "AdaptiveBatch") else "Default"
    if wanted == "AdaptiveBatch":
        reason = adaptive_batch_unsupported(job_graph)
        if reason:
            log.info("job %s runs on the DefaultScheduler: %s", job_graph.job_id, reason)
            return "Default"
    return wanted


def adaptive_batch_unsupported(job_graph: JobGraph) -> str:
    """Why the AdaptiveBatchScheduler cannot run ``job_graph`` ("" when it can): it needs a
    BATCH job whose every dataset is BLOCKING (Flink's ALL_EXCHANGES_BLOCKING limitation)."""
    if job_graph.job_type is not JobType.BATCH:
        return "it is a STREAMING job"
    for vertex in job_graph.vertices:
        for ds in vertex.results:
            if not ds.result_type.is_blocking():
                return f"the output of {vertex.name!r} is {ds.result_type.name}, not BLOCKING"
    return ""


def dynamic_vertices(job_graph: JobGraph, settings: AutoParallelismSettings) -> dict[JobVertexID, int]:
    """The vertices sized at run time -> their largest possible parallelism (the subpartitions
    their producers write on HASH/REBALANCE edges): vertices without a source whose parallelism
    the program did not set, when auto-parallelism is enabled. A vertex whose chain starts with a
    source (even one with network inputs, e.g. a broadcast join chained to it) runs at the
    parallelism its splits were enumerated for."""
    if not settings.enabled:
        return {}
    return {v.id: settings.vertex_max_parallelism(v) for v in job_graph.vertices
            if not v.is_source() and v.source is None and not v.parallelism_configured}


class AdaptiveBatchScheduler(DefaultScheduler):
    """DefaultScheduler that initializes job vertices as their inputs finish.

    Args:
        graph: a dynamic ExecutionGraph (``dynamic_vertices``), status CREATED.
        settings: auto-parallelism bounds and data volume per subtask.
        *args, **kwargs: as for ``DefaultScheduler``.
    """

    def __init__(self, graph: ExecutionGraph, configuration: Configuration, clock: Any,
                 settings: AutoParallelismSettings, **kwargs: Any) -> None:
        super().__init__(graph, configuration, clock, **kwargs)
        self.settings = settings
        #: the decision for each vertex sized at run time, in the order they were made
        self.decisions: dict[JobVertexID, ParallelismAndInputInfos] = {}

    def _on_vertex_finished(self, execution: Execution) -> None:
        self.initialize_vertices_if_possible()

    def initialize_vertices_if_possible(self) -> list[ExecutionVertexID]:
        """Expand every vertex whose producer vertices all FINISHED (Flink
        ``initializeVerticesIfPossible``); returns the new subtasks."""
        graph = self.graph
        new: list[ExecutionVertexID] = []
        for ejv in graph.job_vertices.values():
            if ejv.initialized or not self._inputs_finished(ejv):
                continue
            decision = self._decide(ejv)
            new.extend(graph.initialize_job_vertex(
                ejv.id, decision.parallelism, decision.subpartition_ranges or None))
            if ejv.id in graph.dynamic_vertices:
                self.decisions[ejv.id] = decision
                log.info("job %s: %s runs at parallelism %d (%s)", graph.job_id, ejv.name,
                         decision.parallelism, decision.reason)
        if new:
            added = self.regions.add_blocking_vertices(new)
            for v in new:
                self._order[v] = len(self._order)
            self._schedule(self.strategy.schedule_added_regions(added))
        return new

    def _inputs_finished(self, ejv: ExecutionJobVertex) -> bool:
        for edge in ejv.job_vertex.inputs:
            producer = self.graph.job_vertices[self.graph.producer_vertex_of(edge.source)]
            if not producer.initialized or not producer.all_finished():
                return False
        return True

    def _decide(self, ejv: ExecutionJobVertex) -> ParallelismAndInputInfos:
        graph, jv = self.graph, ejv.job_vertex
        if jv.id not in graph.dynamic_vertices:
            return ParallelismAndInputInfos(jv.parallelism, (), "set by the program")
        for ds in jv.results:  # a FORWARD consumer whose parallelism is fixed decides it
            if ds.ship_strategy is ShipStrategy.FORWARD and ds.consumer not in graph.dynamic_vertices:
                p = graph.job_vertices[ds.consumer].job_vertex.parallelism
                return ParallelismAndInputInfos(p, (), "its FORWARD consumer's parallelism")
        max_p = graph.dynamic_vertices[jv.id]
        infos: list[BlockingInputInfo] = []
        for edge in jv.inputs:
            result = graph.results[edge.source]
            producers = len(result.partitions)
            if edge.ship_strategy is ShipStrategy.FORWARD:
                return ParallelismAndInputInfos(producers, (), "its FORWARD producer's parallelism")
            if edge.ship_strategy is ShipStrategy.GLOBAL:
                return ParallelismAndInputInfos(1, (), "a GLOBAL input")
            if edge.ship_strategy is ShipStrategy.RESCALE:
                max_p = min(max_p, producers)
            infos.append(BlockingInputInfo(
                _bytes_per_subpartition(result),
                broadcast=edge.ship_strategy is ShipStrategy.BROADCAST,
                pointwise=edge.ship_strategy is ShipStrategy.RESCALE))
        decision = decide_parallelism_and_input_infos(
            infos, min(self.settings.min_parallelism, max_p), max_p,
            self.settings.avg_data_volume_per_task)
        if not any(e.ship_strategy in _ALL_TO_ALL for e in jv.inputs):
            decision = ParallelismAndInputInfos(decision.parallelism, (), decision.reason)
        return decision


def _bytes_per_subpartition(result: Any) -> tuple[int, ...]:
    """Bytes per subpartition index of a finished result, summed over its partitions."""
    n = result.partitions[0].number_of_subpartitions if result.partitions else 0
    totals = [0] * n
    for partition in result.partitions:
        sizes = partition.location.bytes_per_subpartition if partition.location is not None else ()
        for k, size in enumerate(sizes[:n]):
            totals[k] += int(size)
    return tuple(totals)
