"""AdaptiveBatchScheduler: a DefaultScheduler over a dynamic ExecutionGraph (pure).

Follows Flink ``AdaptiveBatchScheduler`` (fact sheet 7.4): a BATCH job's vertices whose parallelism
the program did not set (``JobVertex.parallelism_configured`` false) are expanded into subtasks
only once every producer vertex FINISHED; their parallelism and the subpartition range each
subtask reads come from the bytes the producers stored
(``vertex_parallelism_decider``). Their producers write as many subpartitions as the consumer may
get subtasks (``execution.batch.adaptive.auto-parallelism.max-parallelism``, by default the job's
parallelism, at most the consumer's max parallelism): HASH rows land by key group, so a
contiguous range of subpartitions is a contiguous key-group range. Sources whose parallelism the
program did not set get what their source infers from its input (file sources: ``ceil(file bytes
/ avg-data-volume-per-task)``, at most ``default-source-parallelism`` or the job's parallelism;
Flink's dynamic source parallelism inference) and are expanded when scheduling starts. Vertices
with a parallelism set by the program run at it. Each new subtask is its own pipelined region
(all edges are BLOCKING); scheduling, slot sharing and failover are the DefaultScheduler's.

Rules for edges into an automatically sized vertex: FORWARD takes the producer's parallelism
(Flink's forward groups), GLOBAL gives 1, RESCALE at most the producer's, BROADCAST inputs are
read whole and count against at most half a subtask's data volume.

A vertex whose chain head is a hash join (``JobVertex.adaptive_join``) may instead run as a
broadcast join, or with its skewed subpartitions split by producer (``adaptive_join``, Flink's
FLIP-470); its subtasks then read per-input subpartition groups and the plan shows the decision.
A vertex that runs one subtask takes its one-subtask consumer into its chain
(``runtime_chaining``); a job whose every vertex runs one subtask runs as one task
(``whole_job_chaining``), decided when scheduling starts.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flintlock.config import options
from flintlock.config.batch_execution_options import (
    AUTO_PARALLELISM_AVG_DATA_VOLUME_PER_TASK,
    AUTO_PARALLELISM_DEFAULT_SOURCE_PARALLELISM,
    AUTO_PARALLELISM_ENABLED,
    AUTO_PARALLELISM_MAX,
    AUTO_PARALLELISM_MIN,
    RUNTIME_CHAINING_ENABLED,
    WHOLE_JOB_CHAINING_ENABLED,
)
from flintlock.config.configuration import Configuration
from flintlock.runtime.executiongraph.execution import Execution
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.executiongraph.execution_vertex import ExecutionJobVertex
from flintlock.runtime.executiongraph.intermediate_result import IntermediateResult
from flintlock.runtime.ids import ExecutionVertexID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import JobStatus, JobType, ShipStrategy
from flintlock.runtime.scheduler.adaptivebatch.adaptive_join import (
    AdaptiveJoinSettings,
    JoinInput,
    decide_adaptive_join,
)
from flintlock.runtime.scheduler.adaptivebatch.probe_join import (
    ProbeJoin,
    probe_joins,
    probe_side_of,
    stored_bytes,
    unread_build_side,
)
from flintlock.runtime.scheduler.adaptivebatch.runtime_chaining import chained_consumers
from flintlock.runtime.scheduler.adaptivebatch.vertex_parallelism_decider import (
    BlockingInputInfo,
    ParallelismAndInputInfos,
    decide_parallelism_and_input_infos,
)
from flintlock.runtime.scheduler.adaptivebatch.whole_job_chaining import whole_job_chain
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
    #: None: each source vertex's default (the job's) parallelism
    default_source_parallelism: int | None = None
    #: the Spark servers (drivers) of the cluster's TaskManagers
    #: (``ResourceOverview.spark_servers``) when the job started; None: unknown
    cluster_spark_servers: int | None = None

    @classmethod
    def from_configuration(cls, configuration: Configuration) -> AutoParallelismSettings:
        return cls(
            enabled=configuration.get(AUTO_PARALLELISM_ENABLED),
            min_parallelism=configuration.get(AUTO_PARALLELISM_MIN),
            max_parallelism=configuration.get(AUTO_PARALLELISM_MAX),
            avg_data_volume_per_task=configuration.get(AUTO_PARALLELISM_AVG_DATA_VOLUME_PER_TASK),
            default_source_parallelism=configuration.get(AUTO_PARALLELISM_DEFAULT_SOURCE_PARALLELISM),
        )

    def _bound(self, vertex: JobVertex) -> int | None:
        return self.default_source_parallelism if vertex.source is not None else self.max_parallelism

    def vertex_max_parallelism(self, vertex: JobVertex) -> int:
        """The most subtasks ``vertex`` may get (and the subpartitions its producers write for
        it): the configured bound (``default-source-parallelism`` for a vertex with a source,
        ``max-parallelism`` for the others), else its default (the job's) parallelism; never
        above its max parallelism (key groups)."""
        bound = self._bound(vertex)
        wanted = bound if bound is not None else vertex.parallelism
        return max(1, min(wanted, vertex.max_parallelism))

    def decided_at_most(self, vertex: JobVertex, upper: int) -> int:
        """``upper`` (``vertex_max_parallelism``), at most the cluster's Spark servers when they
        are known and no key set the bound. One subtask already runs on every core its Spark
        server has (as Spark tasks over its splits), so a second subtask of the vertex on the
        same server only adds a Spark job, a plan and files, and competes for the same cores
        (TPC-H Q6 at SF 1 on one server: 0.43-0.55 s as one subtask, 0.68-0.96 s as two)."""
        if self._bound(vertex) is None and self.cluster_spark_servers:
            return max(1, min(upper, self.cluster_spark_servers))
        return upper


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
    their producers write on HASH/REBALANCE edges): vertices whose parallelism the program did
    not set, when auto-parallelism is enabled, except a source whose FORWARD consumer has a set
    parallelism. A vertex whose chain starts with a source (even one with network inputs, e.g. a
    broadcast join chained to it) runs at the parallelism its splits were enumerated for
    (``AdaptiveBatchScheduler.source_parallelism``)."""
    if not settings.enabled:
        return {}
    fixed = {v.id for v in job_graph.vertices if v.parallelism_configured}
    return {v.id: settings.vertex_max_parallelism(v) for v in job_graph.vertices
            if not v.parallelism_configured
            and not (v.source is not None and any(
                ds.ship_strategy is ShipStrategy.FORWARD and ds.consumer in fixed
                for ds in v.results))}


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
        #: adaptive broadcast join and skewed-join settings (``adaptive_join``)
        self.join_settings = AdaptiveJoinSettings.from_configuration(configuration)
        #: how each dynamic source's parallelism was found (``source_parallelism``)
        self._source_reasons: dict[JobVertexID, str] = {}
        #: called with each vertex initialization, in order (batch job recovery records them)
        self.on_initialized: Callable[[JobVertexID, ParallelismAndInputInfos], None] | None = None
        #: probe side producers held until their join's other side finished (``probe_joins``)
        self._probes: dict[JobVertexID, ProbeJoin] = {}
        self._probes_enabled = False
        #: chain a one-subtask vertex's one-subtask consumer into it (``runtime_chaining``)
        self._runtime_chaining = bool(configuration.get(RUNTIME_CHAINING_ENABLED)
                                      and configuration.get(options.OPERATOR_CHAINING))
        #: run a job whose every vertex runs one subtask as one task (``whole_job_chaining``)
        self._whole_job_chaining = self._runtime_chaining \
            and bool(configuration.get(WHOLE_JOB_CHAINING_ENABLED))

    def source_parallelism(self, vertex: JobVertex) -> int:
        """A dynamic source's parallelism: what its source infers from its input
        (``infer_parallelism(upper bound, avg-data-volume-per-task)``, Flink's
        ``DynamicParallelismInference``; file sources: the files' bytes), else the upper bound
        (``default-source-parallelism``, else the job's parallelism). Called on the JobMaster's
        I/O thread before scheduling starts; may list files.

        Raises:
            SourceException: the source cannot list its input.
        """
        upper = self.graph.dynamic_vertices.get(vertex.id)
        if upper is None:
            return vertex.parallelism
        upper = self.settings.decided_at_most(vertex, upper)
        infer = getattr(vertex.source, "infer_parallelism", None)
        if not callable(infer):
            self._source_reasons[vertex.id] = "the default source parallelism"
            return upper
        inferred = max(1, min(upper, int(infer(upper, self.settings.avg_data_volume_per_task))))
        self._source_reasons[vertex.id] = "inferred from the source's input size"
        return inferred

    def _on_start(self) -> None:
        settings = self.join_settings
        whole_job = self._chain_whole_job()
        # not under batch job recovery: its job events do not record such a decision yet
        self._probes_enabled = self.on_initialized is None and not whole_job \
            and settings.broadcast_strategy != "NONE" and settings.broadcast_threshold >= 0
        if self._probes_enabled:
            self._probes = probe_joins(self.graph, settings)
        self.initialize_vertices_if_possible()

    def _on_vertex_finished(self, execution: Execution) -> None:
        self.initialize_vertices_if_possible()

    def initialize_vertices_if_possible(self) -> list[ExecutionVertexID]:
        """Expand every vertex whose producer vertices all FINISHED (Flink
        ``initializeVerticesIfPossible``); returns the new subtasks."""
        graph = self.graph
        new: list[ExecutionVertexID] = []
        for ejv in graph.job_vertices.values():
            if ejv.initialized or ejv.chained_into is not None or not self._inputs_finished(ejv):
                continue
            decision = self._decide(ejv)
            self._chain_consumers(ejv, decision.parallelism)
            new.extend(self._initialize(ejv, decision))
            plan = self._probes.get(ejv.id) or self._probe_join(ejv)
            if plan is not None:
                self._push_join(ejv, plan)
            if ejv.id in graph.dynamic_vertices:
                log.info("job %s: %s runs at parallelism %d (%s)", graph.job_id, ejv.name,
                         decision.parallelism, decision.reason)
            if self.on_initialized is not None:
                self.on_initialized(ejv.id, decision)
        if new:
            self._schedule(self.strategy.schedule_added_regions(self._add_regions(new)))
        return new

    def _chain_whole_job(self) -> bool:
        """When every vertex will run one subtask, chain them all into the first source
        (``whole_job_chaining``); not under batch job recovery, whose job events do not
        record it yet. Returns whether it did."""
        if not self._whole_job_chaining or self.on_initialized is not None:
            return False
        graph = self.graph
        ordered = whole_job_chain(graph, self.splits, self.settings.decided_at_most)
        if not ordered:
            return False
        root = ordered[0]
        for vertex in ordered[1:]:
            graph.chain_consumer(root.id, vertex.id, whole_job=True)
            vertex.operator_strategy = f"chained into {root.name} at run time (whole job)"
        root.whole_job_chained = True
        log.info("job %s: every vertex runs one subtask, so the whole job (%d vertices) runs as "
                 "one task of %s", graph.job_id, len(ordered), root.name)
        return True

    def _chain_consumers(self, ejv: ExecutionJobVertex, parallelism: int) -> None:
        """Chain into ``ejv`` (about to be initialized) the consumers ``runtime_chaining``
        picks; not under batch job recovery, whose job events do not record it yet."""
        if not self._runtime_chaining or self.on_initialized is not None:
            return
        for consumer in chained_consumers(self.graph, ejv, parallelism, self._probes):
            self.graph.chain_consumer(ejv.id, consumer.id)
            consumer.operator_strategy = f"chained into {ejv.name} at run time"
            log.info("job %s: %s runs chained into %s (both at parallelism %d)",
                     self.graph.job_id, consumer.name, ejv.name, parallelism)

    def _initialize(self, ejv: ExecutionJobVertex,
                    decision: ParallelismAndInputInfos) -> list[ExecutionVertexID]:
        new = self.graph.initialize_job_vertex(
            ejv.id, decision.parallelism, decision.subpartition_ranges or None,
            decision.input_infos or None)
        ejv.broadcast_join_side = decision.broadcast_side
        # a join moved into its probe side's producers said so when that was decided
        ejv.operator_strategy = decision.operator_strategy or ejv.operator_strategy
        if ejv.id in self.graph.dynamic_vertices:
            self.decisions[ejv.id] = decision
        return new

    def _add_regions(self, new: list[ExecutionVertexID]) -> Any:
        added = self.regions.add_blocking_vertices(new)
        for v in new:
            self._order[v] = len(self._order)
        return added

    def replay_initializations(
            self, splits: Mapping[JobVertexID, list[list[Any]]],
            initializations: Sequence[tuple[JobVertexID, ParallelismAndInputInfos]],
    ) -> list[JobVertexID]:
        """Before ``StartScheduling`` (batch job recovery): initialize the vertices an earlier
        leader initialized, as it decided, in its order, without scheduling them, so that the
        subtasks it finished can be restored into the same graph. Stops at the first decision
        that no longer fits (a source whose splits changed, a vertex unknown or whose producers
        are not initialized): the vertices from there on are decided anew as their inputs
        finish. Returns the vertices initialized."""
        assert self.graph.state is JobStatus.CREATED, "replay before scheduling starts"
        self.splits = dict(splits)
        done: list[JobVertexID] = []
        new: list[ExecutionVertexID] = []
        for vertex_id, decision in initializations:
            ejv = self.graph.job_vertices.get(vertex_id)
            why = ""
            if ejv is None:
                why = "no such vertex"
            elif ejv.initialized:
                why = "" if ejv.parallelism == decision.parallelism else "initialized differently"
                if not why:
                    continue
            elif ejv.job_vertex.source is not None and vertex_id in self.graph.dynamic_vertices \
                    and len(splits.get(vertex_id) or ()) != decision.parallelism:
                why = (f"its source now has splits for {len(splits.get(vertex_id) or ())} "
                       f"subtasks, not {decision.parallelism}")
            if why:
                log.warning("job %s: not replaying the decisions from vertex %s on (%s); they "
                            "are made anew", self.graph.job_id, vertex_id, why)
                break
            assert ejv is not None
            try:
                new.extend(self._initialize(ejv, decision))
            except ValueError as exc:
                log.warning("job %s: not replaying the decisions from %s on (%s); they are "
                            "made anew", self.graph.job_id, ejv.name, exc)
                break
            done.append(vertex_id)
        if new:
            self._add_regions(new)
        return done

    def _inputs_finished(self, ejv: ExecutionJobVertex) -> bool:
        """Its producers all FINISHED; a held probe side's producer also waits for its join's
        other side (``probe_joins``)."""
        sources = [edge.source for edge in ejv.job_vertex.inputs]
        if ejv.id in self._probes:
            sources.append(self._probes[ejv.id].build_dataset)
        for dataset in sources:
            producer = self.graph.job_vertices[self.graph.producer_vertex_of(dataset)]
            if not producer.initialized or not producer.all_finished():
                return False
        return True

    def _probe_join(self, ejv: ExecutionJobVertex) -> ProbeJoin | None:
        """The join ``ejv`` (being initialized) may run, without having been held: it feeds only
        a join sized at run time whose other side already finished (``probe_side_of``)."""
        return probe_side_of(self.graph, ejv, self.join_settings) if self._probes_enabled else None

    def _push_join(self, probe: ExecutionJobVertex, plan: ProbeJoin) -> None:
        """Just initialized ``probe``, whose join's other side finished: when that side stored at
        most the broadcast threshold, the join runs in ``probe``'s subtasks as a broadcast join
        reading that side whole (one more input gate), and the join vertex reads the joined rows
        (Flink FLIP-470's adaptive broadcast join without the probe side's shuffle)."""
        stored = stored_bytes(self.graph.results[plan.build_dataset])
        threshold = self.join_settings.broadcast_threshold
        join = self.graph.job_vertices[plan.join_vertex]
        why = ""
        if threshold < 0 or stored > threshold:
            why = f"above table.optimizer.adaptive-broadcast-join.threshold {threshold}"
        elif not plan.pays(stored, probe.parallelism):
            why = (f"too much to read in each of {probe.parallelism} subtasks against "
                   f"~{plan.probe_bytes} bytes on this side")
        if why:
            log.info("job %s: %s joins its input from %s as compiled (the %s side stored %d "
                     "bytes, %s)", self.graph.job_id, join.name, probe.name, plan.build_side,
                     stored, why)
            return
        self.graph.add_broadcast_input(probe.id, plan.build_dataset)
        probe.pushed_join_into = join.id
        probe.pushed_join_side = plan.probe_side
        probe.pushed_join_reduce = plan.reduce_only
        if plan.reduce_only:
            join.operator_strategy = (f"HASH_JOIN ({plan.probe_side} side cut to the keys of the "
                                      f"{plan.build_side} side, {stored} bytes, in {probe.name})")
            probe.operator_strategy = (f"keeps the rows whose keys the {plan.build_side} side "
                                       f"of {join.name} has")
            log.info("job %s: %s cuts its rows to the keys of the %s side of %s (%d bytes)",
                     self.graph.job_id, probe.name, plan.build_side, join.name, stored)
            return
        join.pushed_probe_side = plan.probe_side
        join.operator_strategy = (f"BROADCAST_HASH_JOIN (adaptive, {plan.build_side} side "
                                  f"{stored} bytes, joined in {probe.name})")
        probe.operator_strategy = f"joins for {join.name} (broadcast {plan.build_side} side)"
        log.info("job %s: %s runs the join of %s, broadcasting its %s side (%d bytes)",
                 self.graph.job_id, probe.name, join.name, plan.build_side, stored)

    def _decide(self, ejv: ExecutionJobVertex) -> ParallelismAndInputInfos:
        graph, jv = self.graph, ejv.job_vertex
        if jv.id not in graph.dynamic_vertices:
            return ParallelismAndInputInfos(jv.parallelism, (), "set by the program")
        if jv.source is not None:  # its splits were enumerated for its parallelism
            splits = self.splits.get(jv.id)
            parallelism = len(splits) if splits else graph.dynamic_vertices[jv.id]
            return ParallelismAndInputInfos(
                parallelism, (), self._source_reasons.get(jv.id, "the default source parallelism"))
        for ds in jv.results:  # a FORWARD consumer whose parallelism is fixed decides it
            if ds.ship_strategy is ShipStrategy.FORWARD and ds.consumer not in graph.dynamic_vertices:
                p = graph.job_vertices[ds.consumer].job_vertex.parallelism
                return ParallelismAndInputInfos(p, (), "its FORWARD consumer's parallelism")
        if jv.adaptive_join and not ejv.pushed_probe_side:
            joined = self._decide_join(jv)
            if joined is not None:
                return joined
        unread = unread_build_side(jv, ejv.pushed_probe_side)
        max_p = self.settings.decided_at_most(jv, graph.dynamic_vertices[jv.id])
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
            volumes = _bytes_per_subpartition(result)
            infos.append(BlockingInputInfo(
                tuple(0 for _ in volumes) if edge.source == unread else volumes,
                broadcast=edge.ship_strategy is ShipStrategy.BROADCAST,
                pointwise=edge.ship_strategy is ShipStrategy.RESCALE))
        decision = decide_parallelism_and_input_infos(
            infos, min(self.settings.min_parallelism, max_p), max_p,
            self.settings.avg_data_volume_per_task)
        if not any(e.ship_strategy in _ALL_TO_ALL for e in jv.inputs):
            decision = ParallelismAndInputInfos(decision.parallelism, (), decision.reason)
        return decision


    def _decide_join(self, jv: JobVertex) -> ParallelismAndInputInfos | None:
        """A hash join head's adaptive broadcast or skew decision (``adaptive_join``), with its
        reads keyed by dataset id; None when neither applies."""
        edges = sorted(jv.inputs, key=lambda e: e.type_number)
        if len(edges) != 2 or any(e.ship_strategy is not ShipStrategy.HASH for e in edges):
            return None
        left, right = (JoinInput(_bytes_by_partition(self.graph.results[e.source]))
                       for e in edges)
        max_p = self.settings.decided_at_most(jv, self.graph.dynamic_vertices[jv.id])
        decision = decide_adaptive_join(
            jv.adaptive_join, left, right, self.join_settings,
            min(self.settings.min_parallelism, max_p), max_p,
            self.settings.avg_data_volume_per_task)
        if decision is None:
            return None
        dataset = {"left": edges[0].source, "right": edges[1].source}
        return dataclasses.replace(decision, input_infos={
            dataset[side]: reads for side, reads in decision.input_infos.items()})


def _bytes_by_partition(result: IntermediateResult) -> tuple[tuple[int, ...], ...]:
    """Bytes per subpartition of each partition of a finished result (missing sizes as 0)."""
    n = result.partitions[0].number_of_subpartitions if result.partitions else 0
    rows = []
    for partition in result.partitions:
        sizes = partition.location.bytes_per_subpartition if partition.location is not None else ()
        rows.append(tuple(int(sizes[k]) if k < len(sizes) else 0 for k in range(n)))
    return tuple(rows)


def _bytes_per_subpartition(result: IntermediateResult) -> tuple[int, ...]:
    """Bytes per subpartition index of a finished result, summed over its partitions."""
    return tuple(sum(column) for column in zip(*_bytes_by_partition(result), strict=True))
