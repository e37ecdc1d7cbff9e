"""TaskDeploymentDescriptor: everything a TaskExecutor needs to run one execution attempt.

Follows Flink ``runtime/deployment/{TaskDeploymentDescriptor,InputGateDeploymentDescriptor,
ResultPartitionDeploymentDescriptor}``. For BLOCKING results, a consumer's input gate lists the exact
locations of the finished producer partitions and the subpartition range it reads
(``[start, end]`` inclusive, fact sheet 2.3); producers learn how many subpartitions to write.
For PIPELINED results, producer and consumers are deployed together (one pipelined region) and
the JobMaster names the partition directory up front (Flink's ShuffleMaster registering the
producer's partition at deployment); its locations carry no statistics (``rows_per_subpartition``
is empty).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flintlock.runtime.checkpoint.snapshots import TaskStateSnapshot
from flintlock.runtime.ids import (
    AllocationID,
    ExecutionAttemptID,
    IntermediateDataSetID,
    IntermediateResultPartitionID,
    JobID,
    ResourceID,
)
from flintlock.runtime.jobgraph.types import ResultPartitionType, ShipStrategy

__all__ = [
    "ChainedConsumer",
    "InputGateDeploymentDescriptor",
    "PartitionLocation",
    "PushedJoin",
    "ResultPartitionDeploymentDescriptor",
    "TaskDeploymentDescriptor",
]


@dataclass(frozen=True)
class PartitionLocation:
    """Where one finished producer partition lives and what it holds.

    Attributes:
        partition_id: the IntermediateResultPartition (dataset, producer subtask index).
        producer_attempt: the attempt that wrote it.
        uri: directory of the partition (``<shuffle-dir>/<job>/<dataset>/<subtask>-<attempt>``);
            subpartition ``k`` is under ``<uri>/sp=<k>/``.
        rows_per_subpartition: row count per subpartition index (0 = nothing written there).
        bytes_per_subpartition: stored bytes per subpartition index.
        schema: the rows' schema as a Spark DDL string.
        stores_local_resources_on: the TaskManager whose local disk holds the files (Flink
            ``ShuffleDescriptor.storesLocalResourcesOn``): set by the producing TaskExecutor to its
            ResourceID when its shuffle storage is TM-local (no ``shuffle.storage-dir``
            configured: a temporary directory of the TaskManager process); ``None`` when
            ``shuffle.storage-dir`` is configured (shared storage that outlives the TaskManager).
            When that TaskManager is lost the JobMaster treats the partition as gone.
        format: how subpartitions are stored: ``"parquet"`` (a Spark-written directory
            ``<uri>/sp=<k>/``) or ``"arrow"`` (one Arrow IPC file ``<uri>/sp=<k>.arrow`` written by
            the TaskManager, ``spark.arrow_segments``; bytes are then Arrow bytes).
    """

    partition_id: IntermediateResultPartitionID
    producer_attempt: ExecutionAttemptID
    uri: str
    rows_per_subpartition: tuple[int, ...]
    bytes_per_subpartition: tuple[int, ...]
    schema: str
    stores_local_resources_on: ResourceID | None = None
    format: str = "parquet"


@dataclass(frozen=True)
class InputGateDeploymentDescriptor:
    """Input gate ``index`` of a consumer: which partitions and subpartitions it reads."""

    dataset_id: IntermediateDataSetID
    ship_strategy: ShipStrategy
    result_type: ResultPartitionType
    subpartition_start: int
    subpartition_end: int
    partitions: tuple[PartitionLocation, ...]
    schema: str


@dataclass(frozen=True)
class ResultPartitionDeploymentDescriptor:
    """One partition the task produces: dataset, partitioner, number of subpartitions."""

    partition_id: IntermediateResultPartitionID
    ship_strategy: ShipStrategy
    result_type: ResultPartitionType
    number_of_subpartitions: int
    key_columns: tuple[str, ...] = ()
    max_parallelism: int = 128
    #: PIPELINED only: the partition directory the JobMaster chose (consumers read it while it is
    #: written; ``flintlock.runtime.shuffle.pipelined``), and how many consumer subtasks
    #: acknowledge its segments (backpressure follows the slowest)
    uri: str = ""
    number_of_consumers: int = 1


@dataclass(frozen=True)
class ChainedConsumer:
    """A consumer vertex chained into this task at run time (the AdaptiveBatchScheduler's
    runtime chaining, ``scheduler.adaptivebatch.runtime_chaining``): its operator chain runs on
    this task's output ``input_dataset`` in the same Spark plan, and this task writes the
    consumer's outputs and runs its sinks instead.

    Attributes:
        consumer_name: the consumer vertex's name (for messages).
        consumer_payload: its ``invokable_payload`` (the cloudpickled ``OperatorChain``), whose
            head reads one input gate: ``input_dataset``.
        input_datasets: the dataset each of its input gates reads, in gate order: one output
            of this task's chain (as chained so far); with whole-job chaining
            (``TaskDeploymentDescriptor.whole_job``) any number of them, outputs of this task's
            chain or of vertices chained before it.
        source_splits: whole-job chaining: the splits of its source (all of them; it runs one
            subtask).
    """

    consumer_name: str
    consumer_payload: bytes
    input_datasets: tuple[IntermediateDataSetID, ...] = ()
    source_splits: tuple[Any, ...] = ()

    @property
    def input_dataset(self) -> IntermediateDataSetID | None:
        """The output of this task's chain it consumes, when it reads exactly one."""
        return self.input_datasets[0] if len(self.input_datasets) == 1 else None


@dataclass(frozen=True)
class PushedJoin:
    """A consumer's head hash join that a probe side producer runs (the AdaptiveBatchScheduler's
    adaptive broadcast join moved into the probe side, Flink FLIP-470).

    Attributes:
        consumer_name: the join vertex's name (for messages).
        consumer_payload: the join vertex's ``invokable_payload`` (its cloudpickled
            ``OperatorChain``), whose head ``JoinSpec`` is run.
        probe_side: ``"left"``/``"right"``: the side of that join this task's output is.
        output_dataset: the output the join is chained to.
        build_gate: the input gate that reads the other side whole.
        reduce_only: run a semi join on the join's keys instead (the join type cannot
            broadcast the other side but drops this side's unmatched rows): the output keeps
            its columns, only fewer rows, and the consumer still runs its join.
    """

    consumer_name: str
    consumer_payload: bytes
    probe_side: str
    output_dataset: IntermediateDataSetID
    build_gate: int
    reduce_only: bool = False


@dataclass(frozen=True)
class TaskDeploymentDescriptor:
    """Deploys one execution attempt into an allocated slot.

    Attributes:
        job_id, job_name: the job.
        attempt_id: the ExecutionAttemptID (subtask index and attempt number inside).
        allocation_id: the slot the task runs in.
        vertex_name: the JobVertex name (chained operator names).
        number_of_subtasks: the vertex's parallelism.
        max_parallelism: the vertex's max parallelism.
        invokable_class: ``"module:Class"`` implementing ``TaskInvokable``.
        invokable_payload: opaque bytes for the invokable (the cloudpickled ``OperatorChain``).
        input_gates: one per JobVertex input, in order.
        produced_partitions: one per produced dataset, in output order.
        source_splits: the splits assigned to this subtask (source vertices only).
        job_configuration: the effective configuration of the job (Flink keys -> strings).
        state_uri: where this attempt keeps its operators' state tables (STREAMING jobs; "").
        collect_root: where collect sinks of a STREAMING job write their rows for the
            JobManager's collect coordinator (``pipelined.collect_partition_uri``; "" in BATCH,
            whose collect sinks return their rows as accumulators).
        restore_checkpoint_id, task_restore: the checkpoint this attempt starts from and its
            state in it (Flink ``JobManagerTaskRestore``); None: start from scratch.
        broadcast_join_side: ``"left"``/``"right"``: the hash join at the head of the chain
            runs as a broadcast join of that side (the AdaptiveBatchScheduler's adaptive
            broadcast join; its input gate then reads that side whole); "" as compiled.
        pushed_join: the join of the consumer this task's only output feeds, which this task
            runs as a broadcast join chained to that output (``PushedJoin``); None: none.
        pushed_probe_side: ``"left"``/``"right"``: the hash join at the head of the chain ran in
            that side's producers (their rows arrive joined); the head reads only that gate.
        chained_consumers: consumer vertices chained into this task at run time, in chaining
            order (``ChainedConsumer``); ``produced_partitions`` are then the outputs of the
            chain with them appended.
        whole_job: the chained vertices are every other vertex of the job, each run on the
            DataFrames of its producers' outputs (``whole_job_chaining``,
            ``runtime/spark/whole_job.py``); False: consumers appended one by one.
    """

    job_id: JobID
    job_name: str
    attempt_id: ExecutionAttemptID
    allocation_id: AllocationID
    vertex_name: str
    number_of_subtasks: int
    max_parallelism: int
    invokable_class: str
    invokable_payload: bytes = b""
    input_gates: tuple[InputGateDeploymentDescriptor, ...] = ()
    produced_partitions: tuple[ResultPartitionDeploymentDescriptor, ...] = ()
    source_splits: tuple[Any, ...] = ()
    job_configuration: Mapping[str, str] = field(default_factory=dict)
    state_uri: str = ""
    collect_root: str = ""
    restore_checkpoint_id: int | None = None
    task_restore: TaskStateSnapshot | None = None
    broadcast_join_side: str = ""
    pushed_join: PushedJoin | None = None
    pushed_probe_side: str = ""
    chained_consumers: tuple[ChainedConsumer, ...] = ()
    whole_job: bool = False

    @property
    def subtask_index(self) -> int:
        return self.attempt_id.subtask_index

    def task_name_with_subtask(self) -> str:
        """Flink's ``"<name> (<index+1>/<parallelism>)#<attempt>"``."""
        return (
            f"{self.vertex_name} ({self.subtask_index + 1}/{self.number_of_subtasks})"
            f"#{self.attempt_id.attempt_number}"
        )
