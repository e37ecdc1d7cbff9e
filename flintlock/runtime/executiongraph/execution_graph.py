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
from collections.abc import Callable, Iterator, Sequence

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
    IntermediateResult,
    IntermediateResultPartition,
    compute_subpartition_mapping,
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
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import (
    ALLOWED_JOB_TRANSITIONS,
    ExecutionState,
    IllegalStateTransition,
    JobStatus,
    ResultPartitionType,
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
    ) -> None:
        self.job_graph = job_graph
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
        self._build(attempts_history_size, now)
        #: current attempts not FINISHED / not terminal (kept by transition_execution and
        #: reset_vertex, so the "all finished?" checks after each task report are O(1))
        self._not_finished = sum(1 for e in self.current_executions()
                                 if e.state is not ExecutionState.FINISHED)
        self._not_terminal = sum(1 for e in self.current_executions() if not e.is_terminal())

    # ---- building ------------------------------------------------------------------------------

    def _build(self, attempts_history_size: int, now: int) -> None:
        jg = self.job_graph
        for jv in jg.vertices:
            ejv = ExecutionJobVertex(jv)
            ejv.task_vertices = [
                ExecutionVertex(ejv, i, now, attempts_history_size) for i in range(jv.parallelism)
            ]
            self.job_vertices[jv.id] = ejv
            for ev in ejv.task_vertices:
                self._vertices[ev.id] = ev
        for jv in jg.vertices:
            producer = self.job_vertices[jv.id]
            for ds in jv.results:
                consumer = self.job_vertices.get(ds.consumer)
                if consumer is None:
                    raise ValueError(
                        f"job {jg.name!r}: dataset {ds.id} of {jv.name!r} has an unknown consumer"
                    )
                try:
                    mapping = compute_subpartition_mapping(
                        ds.ship_strategy, jv.parallelism, consumer.parallelism
                    )
                except ValueError as exc:
                    raise ValueError(
                        f"job {jg.name!r}: edge {jv.name!r} -> {consumer.name!r}: {exc}"
                    ) from None
                result = IntermediateResult(ds, mapping)
                for ev in producer.task_vertices:
                    partition = IntermediateResultPartition(
                        id=IntermediateResultPartitionID(ds.id, ev.subtask_index),
                        producer=ev.id,
                        result_type=ds.result_type,
                        number_of_subpartitions=mapping.subpartitions_per_partition[ev.subtask_index],
                    )
                    result.partitions.append(partition)
                    ev.produced_partitions.append(partition)
                    self.partitions[partition.id] = partition
                producer.produced_results.append(result)
                self.results[ds.id] = result
        for jv in jg.vertices:
            consumer = self.job_vertices[jv.id]
            for edge in sorted(jv.inputs, key=lambda e: e.type_number):
                result = self.results[edge.source]
                for ev in consumer.task_vertices:
                    consumed = result.mapping.consumed[ev.subtask_index]
                    ev.inputs.append(ConsumedInput(edge, result, consumed))
                    for n in consumed.partition_numbers:
                        p = result.partitions[n]
                        p.consumers = (*p.consumers, ev.id)

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
        if self.find_current_execution(execution.attempt_id) is execution:
            self._not_finished += was_finished - (execution.state is ExecutionState.FINISHED)
            self._not_terminal += was_terminal - execution.is_terminal()

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

    def find_current_execution(self, attempt_id: ExecutionAttemptID) -> Execution | None:
        """The execution ``attempt_id`` if it is its subtask's current attempt, else None."""
        v = self._vertices.get(attempt_id.execution_vertex_id)
        if v is None or v.current_execution.attempt_id != attempt_id:
            return None
        return v.current_execution

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
        return self._not_finished == 0

    def all_terminal(self) -> bool:
        return self._not_terminal == 0

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
            numbers = [p.attempt_number for p in v.prior_executions] + [e.attempt_number]
            assert numbers == sorted(set(numbers)), f"{v}: attempt numbers {numbers} not increasing"
            for prior in v.prior_executions:
                assert prior.is_terminal(), f"{v}: prior attempt {prior} not terminal"
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
            plan=dict(jg.plan),
            configuration=dict(jg.configuration),
            failure=self.failure_info,
            exception_history=tuple(self.exception_history),
            number_of_restarts=self.number_of_restarts,
            pending_slot_requests=pending_slot_requests,
            next_restart_attempt_ms=(
                self.next_restart_attempt_ms if self.state is JobStatus.RESTARTING else None
            ),
        )
