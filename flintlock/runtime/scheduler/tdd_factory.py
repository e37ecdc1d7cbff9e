"""Builds TaskDeploymentDescriptors from the ExecutionGraph (Flink ``TaskDeploymentDescriptorFactory``).

Input gates list the producers' reported ``PartitionLocation``s (``TaskResult.partitions``, in output
order of the producer vertex's results) and the subpartition range this subtask reads; produced
partitions carry their number of subpartitions. PIPELINED partitions get their directory here,
under ``pipelined_root``, from the producer's current attempt (``shuffle.pipelined``): producer
and consumers of a pipelined region are deployed together and agree on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flintlock.exceptions import FlintlockException
from flintlock.runtime.deployment import (
    ChainedConsumer,
    InputGateDeploymentDescriptor,
    PartitionLocation,
    PushedJoin,
    ResultPartitionDeploymentDescriptor,
    TaskDeploymentDescriptor,
)
from flintlock.runtime.executiongraph.execution import Execution
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.executiongraph.execution_vertex import ExecutionJobVertex, ExecutionVertex
from flintlock.runtime.executiongraph.intermediate_result import IntermediateResultPartition
from flintlock.runtime.ids import (
    AllocationID,
    ExecutionAttemptID,
    IntermediateResultPartitionID,
    JobVertexID,
)
from flintlock.runtime.shuffle.pipelined import collect_root, pipelined_partition_uri, state_uri

__all__ = ["MissingPartitionLocation", "create_task_deployment_descriptor"]


class MissingPartitionLocation(FlintlockException):
    """A consumer is about to be deployed but one of its BLOCKING input partitions has no location.

    Two causes:

    - the partition was lost with its TaskManager (``IntermediateResultPartition.lost_cause``):
      recoverable, and ``partition_not_found`` names the partition, so region failover restarts
      its producer region like for Flink's ``PartitionNotFoundException``;
    - its producer finished without reporting it: a bug, ``non_recoverable``.

    Args:
        message: the explanation (names the consumer, partition and cause).
        partition_id: the partition without a location.
        lost: whether the partition was lost (recoverable) rather than never reported.
    """

    def __init__(self, message: str, partition_id: IntermediateResultPartitionID, lost: bool) -> None:
        super().__init__(message)
        self.partition_id = partition_id
        #: read by ``SerializedError.from_exception``
        self.partition_not_found: str | None = str(partition_id) if lost else None
        self.non_recoverable = not lost


def create_task_deployment_descriptor(
    graph: ExecutionGraph,
    vertex: ExecutionVertex,
    execution: Execution,
    allocation_id: AllocationID,
    splits: Sequence[Any] = (),
    job_configuration: Mapping[str, str] | None = None,
    pipelined_root: str = "",
    restore: tuple[int, Any] | None = None,
    chained_splits: Mapping[JobVertexID, Sequence[Any]] | None = None,
) -> TaskDeploymentDescriptor:
    """The TDD of ``execution`` (an attempt of ``vertex``) in slot ``allocation_id``.

    ``pipelined_root``: the directory under which PIPELINED partitions live (required when the
    job has PIPELINED results). ``restore``: the (checkpoint id, ``TaskStateSnapshot``) the
    attempt starts from. ``chained_splits``: the source splits of vertices chained into this
    one's (whole-job chaining).

    Raises:
        MissingPartitionLocation: a BLOCKING input partition has no location (lost with its
            TaskManager: recoverable; never reported: non-recoverable).
    """
    jv = vertex.job_vertex.job_vertex
    gates: list[InputGateDeploymentDescriptor] = []
    for inp in vertex.inputs:
        locations: list[PartitionLocation] = []
        for partition in inp.partitions():
            if inp.result.result_type.must_be_pipelined_consumed():
                locations.append(_pipelined_location(graph, partition, pipelined_root))
            elif partition.location is not None:
                locations.append(partition.location)
            elif inp.result.result_type.is_blocking():
                if partition.lost_cause is not None:
                    producer = graph.vertex(partition.producer)
                    raise MissingPartitionLocation(
                        f"{execution.task_name_with_subtask()}: input partition {partition.id} "
                        f"is no longer available ({partition.lost_cause}); its producer "
                        f"{producer.job_vertex.name} ({producer.subtask_index + 1}/"
                        f"{producer.job_vertex.parallelism}) must run again",
                        partition.id, lost=True,
                    )
                raise MissingPartitionLocation(
                    f"{execution.task_name_with_subtask()}: input partition {partition.id} of "
                    f"dataset {inp.result.dataset.id} has no location (its producer finished "
                    "without reporting it)",
                    partition.id, lost=False,
                )
        gates.append(
            InputGateDeploymentDescriptor(
                dataset_id=inp.result.dataset.id,
                ship_strategy=inp.edge.ship_strategy,
                result_type=inp.result.result_type,
                subpartition_start=inp.consumed.subpartition_start,
                subpartition_end=inp.consumed.subpartition_end,
                partitions=tuple(locations),
                schema=locations[0].schema if locations else "",
            )
        )
    produced: list[ResultPartitionDeploymentDescriptor] = []
    for partition, result in zip(vertex.produced_partitions, vertex.job_vertex.produced_results, strict=True):
        ds = result.dataset
        consumer_ejv = graph.job_vertices[ds.consumer]
        consumer = consumer_ejv.job_vertex
        pipelined = ds.result_type.must_be_pipelined_consumed()
        produced.append(
            ResultPartitionDeploymentDescriptor(
                partition_id=partition.id,
                ship_strategy=ds.ship_strategy,
                result_type=ds.result_type,
                number_of_subpartitions=partition.number_of_subpartitions,
                key_columns=ds.key_columns,
                max_parallelism=consumer.max_parallelism,
                uri=_pipelined_uri(graph, partition.id, execution.attempt_id, pipelined_root)
                if pipelined else "",
                number_of_consumers=max(1, consumer_ejv.parallelism),
            )
        )
    return TaskDeploymentDescriptor(
        job_id=graph.job_graph.job_id,
        job_name=graph.job_graph.name,
        attempt_id=execution.attempt_id,
        allocation_id=allocation_id,
        vertex_name=jv.name,
        number_of_subtasks=vertex.job_vertex.parallelism,
        max_parallelism=jv.max_parallelism,
        invokable_class=jv.invokable_class,
        invokable_payload=jv.invokable_payload,
        input_gates=tuple(gates),
        produced_partitions=tuple(produced),
        source_splits=tuple(splits),
        job_configuration=dict(job_configuration if job_configuration is not None else graph.job_graph.configuration),
        state_uri=state_uri(pipelined_root, graph.job_graph.job_id, jv.id, execution.attempt_id)
        if pipelined_root else "",
        collect_root=collect_root(pipelined_root, graph.job_graph.job_id) if pipelined_root else "",
        restore_checkpoint_id=restore[0] if restore else None,
        task_restore=restore[1] if restore else None,
        broadcast_join_side=vertex.job_vertex.broadcast_join_side,
        pushed_join=_pushed_join(graph, vertex, len(gates)),
        pushed_probe_side=vertex.job_vertex.pushed_probe_side,
        chained_consumers=tuple(
            _chained_consumer(c, chained_splits or {}) for c in vertex.job_vertex.chained_consumers),
        whole_job=vertex.job_vertex.whole_job_chained,
    )


def _chained_consumer(ejv: ExecutionJobVertex,
                      splits: Mapping[JobVertexID, Sequence[Any]]) -> ChainedConsumer:
    inputs = tuple(e.source for e in sorted(ejv.job_vertex.inputs, key=lambda e: e.type_number))
    return ChainedConsumer(ejv.name, ejv.job_vertex.invokable_payload, inputs,
                           tuple(splits.get(ejv.id) or ()))


def _pushed_join(graph: ExecutionGraph, vertex: ExecutionVertex, gates: int) -> PushedJoin | None:
    """The consumer's join this probe side producer runs (``add_broadcast_input`` gave it the
    build side as its last gate), or None."""
    ejv = vertex.job_vertex
    if ejv.pushed_join_into is None:
        return None
    join = graph.job_vertices[ejv.pushed_join_into]
    return PushedJoin(
        consumer_name=join.name,
        consumer_payload=join.job_vertex.invokable_payload,
        probe_side=ejv.pushed_join_side,
        output_dataset=ejv.job_vertex.results[0].id,
        build_gate=gates - 1,
        reduce_only=ejv.pushed_join_reduce,
    )


def _pipelined_uri(graph: ExecutionGraph, partition_id: IntermediateResultPartitionID,
                   producer_attempt: ExecutionAttemptID, root: str) -> str:
    if not root:
        raise FlintlockException(
            f"job {graph.job_graph.job_id} has PIPELINED results but the JobMaster has no "
            "directory for them (shuffle.storage-dir or its own temporary directory)")
    return pipelined_partition_uri(root, graph.job_graph.job_id, partition_id, producer_attempt)


def _pipelined_location(graph: ExecutionGraph, partition: IntermediateResultPartition,
                        root: str) -> PartitionLocation:
    """Where the producer's current attempt writes a PIPELINED partition (no statistics)."""
    attempt = graph.vertex(partition.producer).current_execution.attempt_id
    return PartitionLocation(
        partition_id=partition.id, producer_attempt=attempt,
        uri=_pipelined_uri(graph, partition.id, attempt, root),
        rows_per_subpartition=(), bytes_per_subpartition=(), schema="",
    )
