"""Typed identifiers of the runtime (Flink's ``JobID``, ``JobVertexID``, ``ExecutionAttemptID``, ...).

Every id is a frozen dataclass, never a bare ``str``, so a ``JobID`` cannot be passed where a
``JobVertexID`` is expected. Random ids are 32 lower-case hex characters, as Flink's ``AbstractID``
prints them (REST paths use that form). Composite ids (``ExecutionVertexID``, ``ExecutionAttemptID``,
``SlotID``, ``IntermediateResultPartitionID``) are built from their parts, as in Flink.

Follows: ``org.apache.flink.api.common.JobID``, ``runtime/jobgraph/JobVertexID``,
``runtime/scheduler/strategy/ExecutionVertexID``, ``runtime/executiongraph/ExecutionAttemptID``,
``runtime/clusterframework/types/{AllocationID,ResourceID,SlotID}``.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import ClassVar, TypeVar

__all__ = [
    "AllocationID",
    "ExecutionAttemptID",
    "ExecutionVertexID",
    "HexID",
    "IntermediateDataSetID",
    "IntermediateResultPartitionID",
    "JobID",
    "JobVertexID",
    "OperatorID",
    "ResourceID",
    "ResultPartitionID",
    "SlotID",
]

_HEX32 = re.compile(r"^[0-9a-f]{32}$")

_H = TypeVar("_H", bound="HexID")


@dataclass(frozen=True, slots=True)
class HexID:
    """A random 128-bit id printed as 32 lower-case hex characters (Flink ``AbstractID``)."""

    hex: str

    kind: ClassVar[str] = "id"

    def __post_init__(self) -> None:
        if not isinstance(self.hex, str) or not _HEX32.match(self.hex):
            raise ValueError(
                f"invalid {self.kind} {self.hex!r}: expected 32 lower-case hex characters"
            )

    @classmethod
    def generate(cls: type[_H]) -> _H:
        """A new random id."""
        return cls(uuid.uuid4().hex)

    @classmethod
    def from_hex(cls: type[_H], text: str) -> _H:
        """Parse ``text``; raises ``ValueError`` naming the id kind when it is malformed."""
        return cls(text.strip().lower() if isinstance(text, str) else text)

    def __str__(self) -> str:
        return self.hex

    def short(self) -> str:
        """The first 8 hex characters, for log lines and thread names."""
        return self.hex[:8]


@dataclass(frozen=True, slots=True)
class JobID(HexID):
    """Identifies one submitted job."""

    kind: ClassVar[str] = "JobID"


@dataclass(frozen=True, slots=True)
class JobVertexID(HexID):
    """Identifies one JobVertex (an operator chain) of a JobGraph."""

    kind: ClassVar[str] = "JobVertexID"


@dataclass(frozen=True, slots=True)
class OperatorID(HexID):
    """Identifies one operator (StreamNode) inside a chain; derived from its uid when given."""

    kind: ClassVar[str] = "OperatorID"


@dataclass(frozen=True, slots=True)
class IntermediateDataSetID(HexID):
    """Identifies the result a JobVertex produces for one (non-chained) output edge."""

    kind: ClassVar[str] = "IntermediateDataSetID"


@dataclass(frozen=True, slots=True)
class AllocationID(HexID):
    """Identifies one allocation of a TaskManager slot to a job."""

    kind: ClassVar[str] = "AllocationID"


@dataclass(frozen=True, slots=True)
class ResourceID:
    """Identifies a TaskManager (TaskExecutor) process, e.g. ``"localhost:36061-a1b2c3"``."""

    value: str

    def __post_init__(self) -> None:
        if not isinstance(self.value, str) or not self.value or len(self.value) > 256:
            raise ValueError(f"invalid ResourceID {self.value!r}")

    @classmethod
    def generate(cls, prefix: str = "taskmanager") -> ResourceID:
        return cls(f"{prefix}-{uuid.uuid4().hex[:12]}")

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class SlotID:
    """A physical slot of a TaskManager: (resource id, slot number)."""

    resource_id: ResourceID
    slot_number: int

    def __str__(self) -> str:
        return f"{self.resource_id}_{self.slot_number}"


@dataclass(frozen=True, slots=True)
class ExecutionVertexID:
    """One parallel subtask of a JobVertex: (job vertex id, subtask index)."""

    job_vertex_id: JobVertexID
    subtask_index: int

    def __str__(self) -> str:
        return f"{self.job_vertex_id}_{self.subtask_index}"


@dataclass(frozen=True, slots=True)
class ExecutionAttemptID:
    """One execution attempt of a subtask: (execution vertex, attempt number) plus a random part.

    The random part keeps attempt ids of a re-submitted job distinct. ``str()`` is a valid Spark
    tag (letters, digits, ``_`` and ``-`` only), used as the task's Spark job tag.
    """

    execution_vertex_id: ExecutionVertexID
    attempt_number: int
    nonce: str = ""

    @classmethod
    def generate(cls, vertex: ExecutionVertexID, attempt_number: int) -> ExecutionAttemptID:
        return cls(vertex, attempt_number, uuid.uuid4().hex[:8])

    @property
    def job_vertex_id(self) -> JobVertexID:
        return self.execution_vertex_id.job_vertex_id

    @property
    def subtask_index(self) -> int:
        return self.execution_vertex_id.subtask_index

    def __str__(self) -> str:
        return f"{self.execution_vertex_id}_{self.attempt_number}_{self.nonce}"

    def short(self) -> str:
        return (
            f"{self.job_vertex_id.short()}_{self.subtask_index}_{self.attempt_number}"
        )


@dataclass(frozen=True, slots=True)
class IntermediateResultPartitionID:
    """The partition one producer subtask writes for an IntermediateDataSet."""

    dataset_id: IntermediateDataSetID
    partition_number: int

    def __str__(self) -> str:
        return f"{self.dataset_id}#{self.partition_number}"


@dataclass(frozen=True, slots=True)
class ResultPartitionID:
    """A result partition as produced by one attempt (Flink ``ResultPartitionID``)."""

    partition_id: IntermediateResultPartitionID
    producer_id: ExecutionAttemptID

    def __str__(self) -> str:
        return f"{self.partition_id}@{self.producer_id}"
