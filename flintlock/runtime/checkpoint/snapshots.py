"""What a checkpoint holds: per subtask a ``TaskStateSnapshot``; per checkpoint a ``CompletedCheckpoint``.

Follows Flink ``runtime/checkpoint/{TaskStateSnapshot,OperatorSubtaskState,CompletedCheckpoint,
JobManagerTaskRestore}`` and ``Checkpoints.storeCheckpointMetadata``. Everything here is JSON
(the ``_metadata`` file and the acknowledgement's payload): restoring a checkpoint never unpickles.

A subtask's progress at barrier n (ARCHITECTURE section 4b) is:

- ``source_offset``: its source's position after everything it emitted before the barrier
  (``{"position": 1234}`` of a generator, ``{"seen": [paths]}`` of a monitored directory,
  ``{"done": true}`` of a bounded source read whole, ``{}`` when nothing can be replayed);
- ``operators``: per stateful chain node, the state table version copied into the checkpoint
  (``OperatorStateHandle``) and the operator's times;
- ``sink_transactions``: per sink, the directories of finished part files pre-committed at the
  barrier (Flink's FileSink committables), published when the checkpoint completes;
- ``finished``: the subtask had ended before the barrier (nothing to restore, nothing to emit).

With aligned (EXACTLY_ONCE) barriers no record is in flight between subtasks at barrier n, so
channel state is empty and restarted subtasks start with empty input and output partitions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CheckpointMetadataException",
    "CompletedCheckpoint",
    "OperatorStateHandle",
    "TaskStateSnapshot",
    "subtask_key",
]

METADATA_VERSION = 1


class CheckpointMetadataException(ValueError):
    """A ``_metadata`` file or acknowledgement that cannot be read (names what is wrong)."""


def subtask_key(vertex_id: object, subtask_index: int) -> str:
    """How a checkpoint names one subtask: ``"<job vertex id>/<subtask index>"``."""
    return f"{vertex_id}/{subtask_index}"


@dataclass(frozen=True)
class OperatorStateHandle:
    """The state of one stateful operator of a chain at a barrier.

    Attributes:
        node: the operator's index in its chain.
        operator_id: its OperatorID (text).
        state_dir: the state table version copied into the checkpoint ("" when it held no rows).
        rows: rows in that version.
        ddl: the state rows' Spark DDL schema.
        watermark: the operator's watermark (ms) after its last epoch.
        next_event, next_processing: its earliest pending event- / processing-time firing (ms).
        max_timestamp: a watermark assigner's highest event time seen (ms).
        size_bytes: stored bytes of ``state_dir``.
        kind: the operator's state kind (``time_specs.state_kind``; "" in checkpoints written
            before it was recorded).
    """

    node: int
    operator_id: str = ""
    state_dir: str = ""
    rows: int = 0
    ddl: str = ""
    watermark: int | None = None
    next_event: int | None = None
    next_processing: int | None = None
    max_timestamp: int | None = None
    size_bytes: int = 0
    kind: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OperatorStateHandle:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass(frozen=True)
class TaskStateSnapshot:
    """One subtask's state at a barrier (see the module docstring)."""

    source_offset: Mapping[str, Any] | None = None
    operators: tuple[OperatorStateHandle, ...] = ()
    sink_transactions: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    finished: bool = False
    #: the OperatorID of the source the offset belongs to (matched on restore from a savepoint)
    source_operator: str = ""

    @property
    def state_size(self) -> int:
        """Stored bytes of the operators' state (``lastCheckpointSize`` adds these up)."""
        return sum(op.size_bytes for op in self.operators)

    def to_dict(self) -> dict[str, Any]:
        return {"source_offset": None if self.source_offset is None else dict(self.source_offset),
                "operators": [op.to_dict() for op in self.operators],
                "sink_transactions": {str(k): list(v) for k, v in self.sink_transactions.items()},
                "finished": self.finished, "source_operator": self.source_operator}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TaskStateSnapshot:
        try:
            return cls(
                source_offset=d.get("source_offset"),
                operators=tuple(OperatorStateHandle.from_dict(o) for o in d.get("operators", ())),
                sink_transactions={int(k): tuple(str(p) for p in v)
                                   for k, v in (d.get("sink_transactions") or {}).items()},
                finished=bool(d.get("finished")),
                source_operator=str(d.get("source_operator") or ""),
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise CheckpointMetadataException(f"bad subtask state {d!r}: {exc}") from exc


@dataclass(frozen=True)
class CompletedCheckpoint:
    """A checkpoint every subtask acknowledged (Flink ``CompletedCheckpoint``).

    Attributes:
        job_id: the job (text).
        checkpoint_id: n (1, 2, ...).
        trigger_timestamp_ms, completion_timestamp_ms: wall clock (ms).
        external_pointer: its directory (``<state.checkpoints.dir>/<job>/chk-<n>``).
        tasks: ``subtask_key(vertex, index)`` -> the subtask's state.
        savepoint: taken as a savepoint (not subsumed, not deleted with the job).
    """

    job_id: str
    checkpoint_id: int
    trigger_timestamp_ms: int
    completion_timestamp_ms: int
    external_pointer: str
    tasks: Mapping[str, TaskStateSnapshot]
    savepoint: bool = False

    @property
    def state_size(self) -> int:
        return sum(t.state_size for t in self.tasks.values())

    def task_state(self, vertex_id: object, subtask_index: int) -> TaskStateSnapshot | None:
        return self.tasks.get(subtask_key(vertex_id, subtask_index))

    def to_json(self) -> str:
        return json.dumps({
            "version": METADATA_VERSION, "job_id": self.job_id,
            "checkpoint_id": self.checkpoint_id, "savepoint": self.savepoint,
            "trigger_timestamp": self.trigger_timestamp_ms,
            "completion_timestamp": self.completion_timestamp_ms,
            "external_pointer": self.external_pointer,
            "tasks": {k: v.to_dict() for k, v in sorted(self.tasks.items())},
        }, indent=1)

    @classmethod
    def from_json(cls, text: str, where: str = "_metadata") -> CompletedCheckpoint:
        """Parse a ``_metadata`` file.

        Raises:
            CheckpointMetadataException: not JSON, another version, or fields missing (named).
        """
        try:
            d = json.loads(text)
        except ValueError as exc:
            raise CheckpointMetadataException(f"{where} is not checkpoint metadata (not JSON: "
                                              f"{exc})") from exc
        if not isinstance(d, dict) or d.get("version") != METADATA_VERSION:
            raise CheckpointMetadataException(
                f"{where} is not flintlock checkpoint metadata of version {METADATA_VERSION}")
        try:
            return cls(str(d["job_id"]), int(d["checkpoint_id"]), int(d["trigger_timestamp"]),
                       int(d["completion_timestamp"]), str(d["external_pointer"]),
                       {str(k): TaskStateSnapshot.from_dict(v) for k, v in d["tasks"].items()},
                       bool(d.get("savepoint")))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CheckpointMetadataException(f"{where} is incomplete or corrupt: {exc!r}") from exc
