"""ExecutionGraph: the physical, per-subtask graph of one job and its job status (pure).

Follows Flink ``DefaultExecutionGraph`` + ``DefaultExecutionGraphBuilder`` (fact sheet 2.3): one
ExecutionJobVertex per JobVertex, one ExecutionVertex per subtask, one Execution per attempt, one
IntermediateResult per IntermediateDataSet with one partition per producer subtask. The job status
moves only through ``transition_to`` (checked against ``ALLOWED_JOB_TRANSITIONS``). No asyncio, no
I/O: time comes from the injected ``now_ms``; the JobMaster's scheduler drives it on its mailbox.

The graph also serves as the scheduling topology of the region computation and the failover
strategies (``execution_vertex_ids``, ``consumed_partition_ids``, ``producer_of``, ...).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from flintlock.runtime.executiongraph.archived import (
    ArchivedExecutionGraph,
    ExceptionHistoryEntry,
)
from flintlock.runtime.executiongraph.execution import Execution
from flintlock.runtime.executiongraph.execution_vertex import (
    ConsumedInput,
    ExecutionJobVertex,
    ExecutionVertex,
)
from flintlock.runtime.executiongraph.intermediate_result import (
    ConsumedSubpartitions,
    IntermediateResult,
    IntermediateResultPartition,
    SubpartitionMapping,
    compute_subpartition_mapping,
    explicit_subpartition_mapping,
)
from flintlock.runtime.executiongraph.intermediate_result import (
    dynamic_subpartition_mapping as _dynamic_mapping,
)
from flintlock.runtime.executiongraph.story import Story
from flintlock.runtime.ids import (
    ExecutionAttemptID,
    ExecutionVertexID,
    IntermediateDataSetID,
    IntermediateResultPartitionID,
    JobVertexID,
    ResourceID,
)
from flintlock.runtime.jobgraph.job_graph import IntermediateDataSet, JobEdge, JobGraph
from flintlock.runtime.jobgraph.types import (
    ALLOWED_JOB_TRANSITIONS,
    ExecutionState,
    IllegalStateTransition,
    JobStatus,
    ResultPartitionType,
    ShipStrategy,
)
from flintlock.runtime.taskmanager.task_execution_state import TaskResult

__all__ = ["ExecutionGraph"]

log = logging.getLogger(__name__)


class ExecutionGraph:
    """The job's subtasks, attempts, results and status.

    Args:
        job_graph: the submitted JobGraph (vertices in topological order).
        now_ms: epoch-millisecond clock for state timestamps.
        attempts_history_size: prior attempts kept per subtask
            (``jobmanager.execution.attempts-history-size``).
        initialization_timestamp_ms: when the job was accepted (recorded as INITIALIZING).

    Raises:
        ValueError: an edge cannot be expanded (FORWARD with a parallelism change, GLOBAL into
            parallelism > 1); the message names the vertices.
    """

    def __init__(
        self,
        job_graph: JobGraph,
        now_ms: Callable[[], int],
        attempts_history_size: int = 16,
        initialization_timestamp_ms: int | None = None,
        dynamic_vertices: Mapping[JobVertexID, int] | None = None,
    ) -> None:
        self.job_graph = job_graph
        #: vertices sized at run time (AdaptiveBatchScheduler) -> the subpartitions producers
        #: write for them on HASH/REBALANCE edges (their largest possible parallelism)
        self.dynamic_vertices: Mapping[JobVertexID, int] = dict(dynamic_vertices or {})
        self._producers = {ds.id: jv.id for jv in job_graph.vertices for ds in jv.results}
        self._now_ms = now_ms
        now = now_ms()
        #: job status
        self.state = JobStatus.CREATED
        #: epoch ms at which each status was entered
        self.state_timestamps: dict[JobStatus, int] = {}
        if initialization_timestamp_ms is not None:
            self.state_timestamps[JobStatus.INITIALIZING] = initialization_timestamp_ms
        self.state_timestamps[JobStatus.CREATED] = now
        self.story = Story(128)
        self.story.record(now, "job CREATED")
        #: the root cause once the job failed
        self.failure_info: ExceptionHistoryEntry | None = None
        #: every task/global failure, oldest first
        self.exception_history: list[ExceptionHistoryEntry] = []
        self.number_of_restarts = 0
        #: epoch ms at which the latest scheduled restart may begin (set by the scheduler)
        self.next_restart_attempt_ms: int | None = None
        self.job_vertices: dict[JobVertexID, ExecutionJobVertex] = {}
        self.results: dict[IntermediateDataSetID, IntermediateResult] = {}
        self.partitions: dict[IntermediateResultPartitionID, IntermediateResultPartition] = {}
        self._vertices: dict[ExecutionVertexID, ExecutionVertex] = {}
        #: current attempts not FINISHED / not terminal (kept by transition_execution,
        #: reset_vertex and _initialize, so the "all finished?" checks after each task report are
        #: O(1)); job vertices not expanded into subtasks yet (dynamic graphs)
        self._not_finished = self._not_terminal = 0
        self._uninitialized = len(job_graph.vertices)
        #: subtasks that got speculative attempts (``has_live_speculative_executions``)
        self._speculated: set[ExecutionVertexID] = set()
        self._history = attempts_history_size
        self._build(now)

    # ---- building ------------------------------------------------------------------------------

    def _build(self, now: int) -> None:
        for jv in self.job_graph.vertices:
            self.job_vertices[jv.id] = ExecutionJobVertex(jv)
        for jv in self.job_graph.vertices:
            for ds in jv.results:
                if ds.consumer not in self.job_vertices:
                    raise ValueError(
                        f"job {self.job_graph.name!r}: dataset {ds.id} of {jv.name!r} has an "
                        "unknown consumer")
        for jv in self.job_graph.vertices:
            if jv.id in self.dynamic_vertices:
                continue
            if all(self.job_vertices[self.producer_vertex_of(e.source)].initialized for e in jv.inputs):
                self._initialize(self.job_vertices[jv.id], jv.parallelism, None, now)

    def producer_vertex_of(self, dataset_id: IntermediateDataSetID) -> JobVertexID:
        """The job vertex that produces ``dataset_id``."""
        return self._producers[dataset_id]

    def initialize_job_vertex(
        self, job_vertex_id: JobVertexID, parallelism: int,
        subpartition_ranges: Sequence[tuple[int, int]] | None = None,
        input_infos: Mapping[IntermediateDataSetID, Sequence[ConsumedSubpartitions]] | None = None,
    ) -> list[ExecutionVertexID]:
        """Expand a not yet initialized vertex of a dynamic graph into ``parallelism`` subtasks
        (Flink ``DefaultExecutionGraph.initializeJobVertex``).

        Args:
            job_vertex_id: the vertex; all its producer vertices must be initialized.
            parallelism: its decided parallelism.
            subpartition_ranges: per subtask, the inclusive subpartition range it reads of every
                HASH/REBALANCE input whose producers wrote for an automatically sized consumer
                (``dynamic_vertices``); None when it has none.
            input_infos: per consumed dataset, what each subtask reads of it (adaptive joins:
                a broadcast side read whole, skewed subpartitions split by producer); it
                replaces ``subpartition_ranges`` for those inputs.

        Returns:
            The new subtasks' ids, in subtask order.

        Raises:
            ValueError: already initialized, a producer is not, or the parallelism does not fit
                an input (FORWARD needs the producer's, RESCALE at most the producer's, GLOBAL 1).
        """
        ejv = self.job_vertices[job_vertex_id]
        if ejv.initialized:
            raise ValueError(f"vertex {ejv.name!r} is initialized already")
        for edge in ejv.job_vertex.inputs:
            if not self.job_vertices[self.producer_vertex_of(edge.source)].initialized:
                raise ValueError(f"vertex {ejv.name!r}: a producer is not initialized yet")
        self._initialize(ejv, parallelism, subpartition_ranges, self._now_ms(), input_infos)
        return [v.id for v in ejv.task_vertices]

    def chain_consumer(self, producer_id: JobVertexID, consumer_id: JobVertexID,
                       whole_job: bool = False) -> None:
        """Chain ``consumer`` into ``producer`` at run time (``runtime_chaining``): the
        producer's subtasks run the consumer's operators on the output it reads and produce the
        consumer's results; the consumer gets no subtasks of its own and is initialized with the
        producer, at its parallelism. Call before initializing the producer; a consumer chained
        so may take another consumer of its own (chained into the same producer, in order).
        With ``whole_job`` (``whole_job_chaining``) the vertex may also have a source and any
        number of inputs, all of them outputs of the producer as chained so far.

        Raises:
            ValueError: either vertex is initialized or chained already, or the consumer has a
                source or inputs other than one output of the producer (as chained so far).
        """
        producer, consumer = self.job_vertices[producer_id], self.job_vertices[consumer_id]
        jv = consumer.job_vertex
        outputs = {ds.id for ds in self.output_datasets(producer)}
        if producer.initialized or consumer.initialized or producer.chained_into is not None \
                or consumer.chained_into is not None or consumer.chained_consumers:
            raise ValueError(f"cannot chain {consumer.name!r} into {producer.name!r}: one of "
                             "them is initialized or chained already")
        if whole_job:
            if any(edge.source not in outputs for edge in jv.inputs):
                raise ValueError(f"cannot chain {consumer.name!r} into {producer.name!r}: it "
                                 "reads a vertex not chained into it yet")
        elif jv.source is not None or len(jv.inputs) != 1 or jv.inputs[0].source not in outputs:
            raise ValueError(f"cannot chain {consumer.name!r} into {producer.name!r}: it must "
                             "read exactly one output of that vertex and have no source")
        producer.chained_consumers.append(consumer)
        consumer.chained_into = producer
        for ds in jv.results:
            self._producers[ds.id] = producer.id

    def output_datasets(self, ejv: ExecutionJobVertex) -> list[IntermediateDataSet]:
        """The datasets ``ejv``'s subtasks produce, in output order: its own, where each
        consumer chained into it at run time drops those it reads and adds its own at the
        end (the order ``consumer_chaining.chain_consumer`` gives the task's outputs)."""
        out = list(ejv.job_vertex.results)
        for consumer in ejv.chained_consumers:
            read = {edge.source for edge in consumer.job_vertex.inputs}
            out = [ds for ds in out if ds.id not in read] + list(consumer.job_vertex.results)
        return out

    def add_broadcast_input(self, job_vertex_id: JobVertexID, dataset_id: IntermediateDataSetID) -> None:
        """Give every subtask of an initialized, not yet scheduled vertex one more input gate
        that reads all of a finished result (every partition, every subpartition), after its
        own gates; its subtasks become consumers of those partitions, so scheduling waits for
        them, region failover restarts the vertex with their producers, and they are kept
        until the vertex finished. The adaptive join that moves a hash join into its probe
        side's producer reads the build side through it.

        Raises:
            ValueError: the vertex is not initialized or the result not produced.
        """
        ejv = self.job_vertices[job_vertex_id]
        result = self.results.get(dataset_id)
        if not ejv.initialized or result is None or not result.partitions:
            raise ValueError(f"vertex {ejv.name!r} cannot read dataset {dataset_id}: "
                             "the vertex or the result is not initialized")
        gate = len(ejv.job_vertex.inputs)
        # the result's own strategy: its readers then take the subpartition range as given (a
        # BROADCAST gate reads subpartition 0 only, where broadcast results keep everything)
        edge = JobEdge(dataset_id, ejv.id, result.dataset.ship_strategy, type_number=gate)
        last = result.partitions[0].number_of_subpartitions - 1
        consumed = ConsumedSubpartitions(tuple(range(len(result.partitions))), 0, last)
        for ev in ejv.task_vertices:
            ev.inputs.append(ConsumedInput(edge, result, consumed))
            for p in result.partitions:
                p.consumers = (*p.consumers, ev.id)

    def _static_mapping(self, ds: IntermediateDataSet, producers: int) -> SubpartitionMapping | None:
        """The static mapping of ``ds`` when its consumer's parallelism is known, else None."""
        if ds.consumer in self.dynamic_vertices:
            return None
        consumer = self.job_vertices[ds.consumer]
        return compute_subpartition_mapping(ds.ship_strategy, producers, consumer.job_vertex.parallelism)

    def _initialize(self, ejv: ExecutionJobVertex, parallelism: int,
                    ranges: Sequence[tuple[int, int]] | None, now: int,
                    input_infos: Mapping[IntermediateDataSetID, Sequence[ConsumedSubpartitions]]
                    | None = None) -> None:
        jv = ejv.job_vertex
        name = self.job_graph.name
        # inputs first: the mapping of each consumed result is fixed now
        mappings: list[tuple[JobEdge, IntermediateResult, SubpartitionMapping]] = []
        for edge in sorted(jv.inputs, key=lambda e: e.type_number):
            result = self.results[edge.source]
            producers = len(result.partitions)
            subpartitions = result.partitions[0].number_of_subpartitions
            try:
                if result.mapping is not None:
                    mapping = result.mapping
                elif input_infos and edge.source in input_infos:
                    mapping = explicit_subpartition_mapping(
                        producers, subpartitions, input_infos[edge.source])
                else:
                    mapping = _dynamic_mapping(
                        edge.ship_strategy, producers, parallelism, subpartitions, ranges)
                if len(mapping.consumed) != parallelism:
                    raise ValueError(f"parallelism {parallelism} does not match the "
                                     f"{len(mapping.consumed)} consumers its producers wrote for")
            except ValueError as exc:
                producer = self.job_vertices[self.producer_vertex_of(edge.source)]
                raise ValueError(
                    f"job {name!r}: edge {producer.name!r} -> {jv.name!r}: {exc}") from None
            mappings.append((edge, result, mapping))
        ejv.decided_parallelism = parallelism
        ejv.task_vertices = [
            ExecutionVertex(ejv, i, now, self._history) for i in range(parallelism)]
        for ev in ejv.task_vertices:
            self._vertices[ev.id] = ev
        self._not_finished += parallelism
        self._not_terminal += parallelism
        self._uninitialized -= 1 + len(ejv.chained_consumers)
        for consumer in ejv.chained_consumers:
            consumer.decided_parallelism = parallelism
        for edge, result, mapping in mappings:
            result.mapping = mapping
            for ev in ejv.task_vertices:
                consumed = mapping.consumed[ev.subtask_index]
                ev.inputs.append(ConsumedInput(edge, result, consumed))
                for n in consumed.partition_numbers:
                    p = result.partitions[n]
                    p.consumers = (*p.consumers, ev.id)
        for ds in self.output_datasets(ejv):
            try:
                static = self._static_mapping(ds, parallelism)
            except ValueError as exc:
                consumer = self.job_vertices[ds.consumer]
                raise ValueError(
                    f"job {name!r}: edge {jv.name!r} -> {consumer.name!r}: {exc}") from None
            result = IntermediateResult(ds, static)
            for ev in ejv.task_vertices:
                if static is not None:
                    count = static.subpartitions_per_partition[ev.subtask_index]
                elif ds.ship_strategy in (ShipStrategy.HASH, ShipStrategy.REBALANCE):
                    count = self.dynamic_vertices[ds.consumer]
                else:
                    count = 1
                partition = IntermediateResultPartition(
                    id=IntermediateResultPartitionID(ds.id, ev.subtask_index),
                    producer=ev.id,
                    result_type=ds.result_type,
                    number_of_subpartitions=count,
                )
                result.partitions.append(partition)
                ev.produced_partitions.append(partition)
                self.partitions[partition.id] = partition
            ejv.produced_results.append(result)
            self.results[ds.id] = result

    # ---- job status ----------------------------------------------------------------------------

    @property
    def job_id(self) -> object:
        return self.job_graph.job_id

    def now_ms(self) -> int:
        return self._now_ms()

    def transition_to(self, target: JobStatus, cause: str = "") -> None:
        """Move the job to ``target``.

        Raises:
            IllegalStateTransition: ``ALLOWED_JOB_TRANSITIONS`` forbids it.
        """
        now = self._now_ms()
        source = self.state
        if target not in ALLOWED_JOB_TRANSITIONS[source]:
            self.story.record(now, f"REJECTED job {source.name} -> {target.name} {cause}".rstrip())
            raise IllegalStateTransition(
                f"Job {self.job_graph.name!r} ({self.job_graph.job_id})", source, target, str(self.story)
            )
        self.state = target
        self.state_timestamps[target] = now
        self.story.record(now, f"job {source.name} -> {target.name} {cause}".rstrip())
        log.info(
            "Job %s (%s) switched from state %s to %s.",
            self.job_graph.name,
            self.job_graph.job_id,
            source.name,
            target.name,
        )

    def transition_execution(self, execution: Execution, target: ExecutionState, cause: str = "") -> None:
        """Move one attempt (checked, timestamped; see ``Execution.transition_state``)."""
        was_finished, was_terminal = execution.state is ExecutionState.FINISHED, execution.is_terminal()
        execution.transition_state(target, self._now_ms(), cause)
        vertex = self._vertices.get(execution.attempt_id.execution_vertex_id)
        if vertex is not None and vertex.current_execution is execution:
            self._not_finished += was_finished - (execution.state is ExecutionState.FINISHED)
            self._not_terminal += was_terminal - execution.is_terminal()

    def add_speculative_execution(self, vertex_id: ExecutionVertexID) -> Execution:
        """A speculative attempt of subtask ``vertex_id`` (CREATED; not in the counters)."""
        self._speculated.add(vertex_id)
        return self._vertices[vertex_id].add_speculative_execution(self._now_ms())

    def promote(self, execution: Execution) -> None:
        """Make speculative attempt ``execution`` its subtask's representative attempt
        (``ExecutionVertex.promote``), keeping the finished/terminal counters right."""
        vertex = self._vertices[execution.attempt_id.execution_vertex_id]
        old = vertex.current_execution
        vertex.promote(execution)
        self._not_finished += ((old.state is ExecutionState.FINISHED)
                               - (execution.state is ExecutionState.FINISHED))
        self._not_terminal += old.is_terminal() - execution.is_terminal()

    def has_live_speculative_executions(self, writing_sinks_only: bool = False) -> bool:
        """Whether a speculative attempt has not ended (looks at the subtasks that were
        speculated only, forgetting those without speculative attempts left); with
        ``writing_sinks_only``, only attempts of job vertices that write sinks count."""
        return any(not writing_sinks_only or self._vertices[e.attempt_id.execution_vertex_id]
                   .job_vertex.sinks() for e in self.live_speculative_executions())

    def live_speculative_executions(self) -> list[Execution]:
        """The speculative attempts that have not ended (``has_live_speculative_executions``)."""
        live = []
        for vertex_id in list(self._speculated):
            attempts = self._vertices[vertex_id].speculative_executions
            live += [e for e in attempts if not e.is_terminal()]
            if not attempts:
                self._speculated.discard(vertex_id)
        return live

    def reset_vertex(self, vertex_id: ExecutionVertexID, now_ms: int) -> Execution:
        """Start the next attempt of a subtask (``ExecutionVertex.reset_for_new_execution``)."""
        vertex = self._vertices[vertex_id]
        old = vertex.current_execution
        new = vertex.reset_for_new_execution(now_ms)
        self._not_finished += (old.state is ExecutionState.FINISHED) - (new.state is ExecutionState.FINISHED)
        self._not_terminal += old.is_terminal() - new.is_terminal()
        return new

    # ---- lookups / scheduling topology ---------------------------------------------------------

    def execution_vertices(self) -> Iterator[ExecutionVertex]:
        """All subtasks, producers before consumers."""
        for ejv in self.job_vertices.values():
            yield from ejv.task_vertices

    def execution_vertex_ids(self) -> list[ExecutionVertexID]:
        return [v.id for v in self.execution_vertices()]

    def vertex(self, vertex_id: ExecutionVertexID) -> ExecutionVertex:
        return self._vertices[vertex_id]

    def current_executions(self) -> Iterator[Execution]:
        for v in self.execution_vertices():
            yield v.current_execution

    def all_current_executions(self) -> Iterator[Execution]:
        """Every subtask's current attempt and its speculative ones."""
        for v in self.execution_vertices():
            yield from v.current_executions()

    def find_current_execution(self, attempt_id: ExecutionAttemptID) -> Execution | None:
        """The execution ``attempt_id`` if it is one of its subtask's current attempts (the
        representative or a speculative one that has not been archived), else None."""
        v = self._vertices.get(attempt_id.execution_vertex_id)
        if v is None:
            return None
        if v.current_execution.attempt_id == attempt_id:
            return v.current_execution
        for e in v.speculative_executions:
            if e.attempt_id == attempt_id:
                return e
        return None

    def consumed_partition_ids(self, vertex_id: ExecutionVertexID) -> list[IntermediateResultPartitionID]:
        return [p.id for inp in self._vertices[vertex_id].inputs for p in inp.partitions()]

    def produced_partition_ids(self, vertex_id: ExecutionVertexID) -> list[IntermediateResultPartitionID]:
        return [p.id for p in self._vertices[vertex_id].produced_partitions]

    def partition_type(self, partition_id: IntermediateResultPartitionID) -> ResultPartitionType:
        return self.partitions[partition_id].result_type

    def producer_of(self, partition_id: IntermediateResultPartitionID) -> ExecutionVertexID:
        return self.partitions[partition_id].producer

    def consumers_of(self, partition_id: IntermediateResultPartitionID) -> Sequence[ExecutionVertexID]:
        return self.partitions[partition_id].consumers

    def vertex_state(self, vertex_id: ExecutionVertexID) -> ExecutionState:
        return self._vertices[vertex_id].current_execution.state

    def all_finished(self) -> bool:
        return self._not_finished == 0 and self._uninitialized == 0

    def all_terminal(self) -> bool:
        """Every attempt is terminal, speculative ones included."""
        return self._not_terminal == 0 and not self.has_live_speculative_executions()

    # ---- results -------------------------------------------------------------------------------

    def mark_finished(self, execution: Execution, result: TaskResult | None) -> None:
        """Record a FINISHED attempt's result; its partitions count as fully produced.

        ``result.partitions`` are matched to the vertex's produced partitions in output order.
        """
        execution.result = result
        vertex = self._vertices[execution.attempt_id.execution_vertex_id]
        locations = result.partitions if result is not None else ()
        for i, partition in enumerate(vertex.produced_partitions):
            partition.finished = True
            partition.location = locations[i] if i < len(locations) else None
            partition.lost_cause = None

    def mark_partitions_lost(
        self, resource_id: ResourceID, cause: str
    ) -> list[IntermediateResultPartitionID]:
        """TaskManager ``resource_id`` is lost: its TM-local partitions are gone.

        Follows Flink ``JobMasterPartitionTracker.stopTrackingPartitionsFor``: every finished
        partition whose location ``stores_local_resources_on`` that TaskManager loses its location
        (partitions on shared storage, ``stores_local_resources_on=None``, stay available).

        Returns:
            The ids of the partitions marked lost, in graph order.
        """
        lost: list[IntermediateResultPartitionID] = []
        for partition in self.partitions.values():
            location = partition.location
            if location is not None and location.stores_local_resources_on == resource_id:
                partition.mark_lost(cause)
                lost.append(partition.id)
        if lost:
            self.story.record(self._now_ms(), f"{len(lost)} partition(s) lost with {resource_id}")
        return lost

    def record_failure(self, entry: ExceptionHistoryEntry) -> None:
        if self.state is JobStatus.RESTARTING:  # joins the pending failover (concurrentExceptions)
            entry = dataclasses.replace(entry, concurrent=True)
        self.exception_history.append(entry)

    # ---- invariants ----------------------------------------------------------------------------

    def validate(self) -> None:
        """Check the graph's invariants; raises AssertionError naming the first violation."""
        current = list(self.current_executions())
        assert self._not_finished == sum(e.state is not ExecutionState.FINISHED for e in current), \
            "not-finished counter out of date (state changed outside transition_execution?)"
        assert self._not_terminal == sum(not e.is_terminal() for e in current), \
            "not-terminal counter out of date (state changed outside transition_execution?)"
        for v in self.execution_vertices():
            e = v.current_execution
            assert e.attempt_id.execution_vertex_id == v.id, f"{v}: attempt of another vertex"
            assert e.state in e.state_timestamps, f"{e}: no timestamp for its state"
            prior_numbers = [p.attempt_number for p in v.prior_executions]
            assert prior_numbers == sorted(prior_numbers), f"{v}: prior attempts out of order"
            numbers = prior_numbers + [c.attempt_number for c in v.current_executions()]
            assert len(numbers) == len(set(numbers)), f"{v}: attempt numbers {numbers} repeat"
            for prior in v.prior_executions:
                assert prior.is_terminal(), f"{v}: prior attempt {prior} not terminal"
            for spec in v.speculative_executions:
                assert spec.attempt_id.execution_vertex_id == v.id, f"{v}: attempt of another vertex"
                assert spec.slot is not None or spec.state in (
                    ExecutionState.CREATED, ExecutionState.SCHEDULED, ExecutionState.CANCELED,
                    ExecutionState.FAILED), f"{spec}: {spec.state.name} without a slot"
            for p in v.produced_partitions:
                assert p.producer == v.id
                if p.result_type.is_blocking():
                    assert p.finished == (e.state is ExecutionState.FINISHED), (
                        f"{p.id}: finished={p.finished} but producer {e} is {e.state.name}"
                    )
            restored = ExecutionState.RECONCILING in e.state_timestamps  # batch job recovery
            if e.slot is None and not restored:
                assert e.state in (
                    ExecutionState.CREATED, ExecutionState.SCHEDULED, ExecutionState.CANCELED,
                    ExecutionState.FAILED,
                ), f"{e}: {e.state.name} without a slot"
        assert self.state in self.state_timestamps, f"job {self.state.name} has no timestamp"
        if self.state is JobStatus.CREATED:
            assert all(e.state is ExecutionState.CREATED
                       or ExecutionState.RECONCILING in e.state_timestamps
                       for e in self.current_executions())
        if self.state.is_globally_terminal():
            assert self.all_terminal(), f"job {self.state.name} with non-terminal executions"
        if self.state is JobStatus.FINISHED:
            assert self.all_finished(), "job FINISHED but not every subtask FINISHED"
        if self.state is JobStatus.FAILED:
            assert self.failure_info is not None, "job FAILED without a root cause"

    # ---- snapshots -----------------------------------------------------------------------------

    def _plan(self) -> dict[str, Any]:
        """The JobGraph plan; in a dynamic graph each node carries its vertex's current
        parallelism (-1 until decided) and, once an adaptive join was decided, its
        ``operator_strategy``, as Flink regenerates the plan when it initializes vertices."""
        plan = dict(self.job_graph.plan)
        if not self.dynamic_vertices or not isinstance(plan.get("nodes"), list):
            return plan
        by_id = {str(v.id): v for v in self.job_vertices.values()}
        plan["nodes"] = [
            _decided_node(node, by_id[node["id"]])
            if isinstance(node, dict) and node.get("id") in by_id else node
            for node in plan["nodes"]]
        return plan

    def archive(self, now_ms: int | None = None, pending_slot_requests: int = 0) -> ArchivedExecutionGraph:
        """A read-only snapshot for REST, the CLI and the JobResult store."""
        del now_ms  # timestamps are recorded as states change; kept for symmetry with Flink
        jg = self.job_graph
        return ArchivedExecutionGraph(
            job_id=jg.job_id,
            name=jg.name,
            job_type=jg.job_type,
            state=self.state,
            state_timestamps={s.name: ts for s, ts in self.state_timestamps.items()},
            vertices=tuple(ejv.archive() for ejv in self.job_vertices.values()),
            plan=self._plan(),
            configuration=dict(jg.configuration),
            failure=self.failure_info,
            exception_history=tuple(self.exception_history),
            number_of_restarts=self.number_of_restarts,
            pending_slot_requests=pending_slot_requests,
            next_restart_attempt_ms=(
                self.next_restart_attempt_ms if self.state is JobStatus.RESTARTING else None
            ),
        )


def _decided_node(node: dict[str, Any], vertex: ExecutionJobVertex) -> dict[str, Any]:
    decided = {**node, "parallelism": vertex.parallelism}
    if vertex.operator_strategy:
        decided["operator_strategy"] = vertex.operator_strategy
    return decided
