"""JobGraph: the logical, per-operator-chain graph the client submits to the Dispatcher.

Shapes (Flink ``runtime/jobgraph/{JobGraph,JobVertex,JobEdge,IntermediateDataSet}``):
- ``JobGraph.vertices`` are in topological order (producers before consumers).
- A ``JobVertex`` produces one ``IntermediateDataSet`` per non-chained output edge and consumes
  ``JobEdge``s; ``JobVertex.inputs[i]`` is input gate ``i`` of its tasks.
- ``invokable_class`` is ``"module:Class"`` of the task's invokable; ``invokable_payload`` is opaque
  bytes for it (for Spark tasks: the cloudpickled ``OperatorChain``). The control plane never
  unpickles it.
- ``source`` (only on source vertices) is a connectors source object the JobMaster asks for splits
  (``enumerate_splits(parallelism)``); ``sinks`` are connectors sink objects the JobMaster commits
  when the job finishes (two-phase).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from flintlock.runtime.ids import IntermediateDataSetID, JobID, JobVertexID, OperatorID
from flintlock.runtime.jobgraph.types import (
    DistributionPattern,
    JobType,
    ResultPartitionType,
    ShipStrategy,
)

__all__ = ["IntermediateDataSet", "JobEdge", "JobGraph", "JobVertex"]


@dataclass(frozen=True)
class IntermediateDataSet:
    """The data one JobVertex produces for one consumer edge."""

    id: IntermediateDataSetID
    producer: JobVertexID
    result_type: ResultPartitionType
    consumer: JobVertexID
    ship_strategy: ShipStrategy
    key_columns: tuple[str, ...] = ()

    @property
    def distribution_pattern(self) -> DistributionPattern:
        return self.ship_strategy.distribution_pattern()


@dataclass(frozen=True)
class JobEdge:
    """Input ``type_number`` of ``target``: reads ``source`` with ``ship_strategy``."""

    source: IntermediateDataSetID
    target: JobVertexID
    ship_strategy: ShipStrategy
    type_number: int = 0

    @property
    def distribution_pattern(self) -> DistributionPattern:
        return self.ship_strategy.distribution_pattern()


@dataclass(frozen=True)
class JobVertex:
    """One operator chain, run as ``parallelism`` subtasks.

    Attributes:
        id: JobVertexID.
        name: chained operator names joined by ``" -> "`` (as Flink's web UI shows them).
        parallelism: number of subtasks (>= 1).
        max_parallelism: number of key groups for HASH outputs (Flink ``maxParallelism``).
        invokable_class: ``"module:Class"`` implementing ``TaskInvokable``.
        invokable_payload: opaque bytes for the invokable.
        operator_ids: the chained operators' ids, head first.
        operator_names: the chained operators' names, head first.
        operator_state_kinds: the chained operators' state kinds (``time_specs.state_kind``,
            "" for stateless ones), head first; empty when not known.
        inputs: one JobEdge per input gate, in gate order.
        results: produced datasets, in output order.
        slot_sharing_group: name of the slot sharing group (``"default"``).
        source: connectors source object for source vertices, else ``None``.
        sinks: connectors sink objects written by this vertex (committed by the JobMaster).
        parallelism_configured: the program fixed ``parallelism``; False when it is the job's
            default, which the AdaptiveBatchScheduler replaces by one decided at run time
            (Flink leaves such vertices at ``-1`` in a dynamic graph).
        adaptive_join: the ``JoinSpec.how`` of the hash join at the head of its chain (two HASH
            input gates, left then right), which the AdaptiveBatchScheduler may run as a
            broadcast join or split for skew at run time (Flink's ``AdaptiveJoin`` operator);
            "" for any other chain.
        adaptive_join_probe: whether and where the AdaptiveBatchScheduler may move that join
            into a producer as a broadcast join when the other side turns out small (Flink
            FLIP-470's probe side without an exchange; ``scheduler.adaptivebatch.probe_join``):
            ``"left"``/``"right"``: the side the planner estimates large (``JoinSpec.probe``),
            whose producer then starts after the other side; ``"any"``: either side whose
            producer starts after the other side finished; "" never.
        adaptive_join_probe_bytes: the planner's estimate of that probe side's bytes
            (uncompressed rows), 0 when it has none.
    """

    id: JobVertexID
    name: str
    parallelism: int
    max_parallelism: int
    invokable_class: str
    invokable_payload: bytes = b""
    operator_ids: tuple[OperatorID, ...] = ()
    operator_names: tuple[str, ...] = ()
    operator_state_kinds: tuple[str, ...] = ()
    inputs: tuple[JobEdge, ...] = ()
    results: tuple[IntermediateDataSet, ...] = ()
    slot_sharing_group: str = "default"
    source: Any = None
    sinks: tuple[Any, ...] = ()
    parallelism_configured: bool = True
    adaptive_join: str = ""
    adaptive_join_probe: str = ""
    adaptive_join_probe_bytes: int = 0

    def __post_init__(self) -> None:
        if self.parallelism < 1:
            raise ValueError(f"vertex {self.name!r}: parallelism must be >= 1, got {self.parallelism}")
        if self.max_parallelism < self.parallelism:
            raise ValueError(
                f"vertex {self.name!r}: max parallelism {self.max_parallelism} is below its "
                f"parallelism {self.parallelism}"
            )

    def is_source(self) -> bool:
        return not self.inputs


@dataclass(frozen=True)
class JobGraph:
    """A job as submitted: vertices in topological order, plus job-level settings.

    ``configuration`` holds the job's own Flink keys (``execution.runtime-mode``,
    ``restart-strategy.type``, ...) as strings; they override the cluster configuration.
    ``plan`` is Flink's plan JSON (``env.get_execution_plan()``) for REST and the web UI.
    ``slot_sharing_group_resources`` maps a slot sharing group to the ``ResourceProfile`` of its
    slots (fine-grained resources); groups not in it ask for default slots (``UNKNOWN``).
    """

    job_id: JobID
    name: str
    job_type: JobType
    vertices: tuple[JobVertex, ...]
    configuration: Mapping[str, str] = field(default_factory=dict)
    plan: Mapping[str, Any] = field(default_factory=dict)
    slot_sharing_group_resources: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen: set[JobVertexID] = set()
        produced: dict[IntermediateDataSetID, JobVertexID] = {}
        for v in self.vertices:
            for edge in v.inputs:
                if edge.source not in produced:
                    raise ValueError(
                        f"job {self.name!r}: vertex {v.name!r} consumes a dataset no earlier vertex "
                        "produces (vertices must be in topological order)"
                    )
            for ds in v.results:
                produced[ds.id] = v.id
            if v.id in seen:
                raise ValueError(f"job {self.name!r}: duplicate vertex id {v.id}")
            seen.add(v.id)

    def vertex(self, vertex_id: JobVertexID) -> JobVertex:
        for v in self.vertices:
            if v.id == vertex_id:
                return v
        raise KeyError(f"no vertex {vertex_id} in job {self.name!r}")

    def dataset(self, dataset_id: IntermediateDataSetID) -> IntermediateDataSet:
        for v in self.vertices:
            for ds in v.results:
                if ds.id == dataset_id:
                    return ds
        raise KeyError(f"no dataset {dataset_id} in job {self.name!r}")

    def __iter__(self) -> Iterator[JobVertex]:
        return iter(self.vertices)

    def number_of_subtasks(self) -> int:
        return sum(v.parallelism for v in self.vertices)
