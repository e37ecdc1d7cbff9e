"""Source and Sink contracts shared by the API, the JobMaster and the Spark data plane.

- The client puts source/sink objects into the JobGraph (``JobVertex.source`` / ``.sinks`` and
  inside ``SourceSpec``/``SinkSpec`` of the operator chain). They are plain picklable objects.
- The JobMaster calls ``Source.enumerate_splits`` once, when it builds the ExecutionGraph, and ships
  each subtask its splits in the TaskDeploymentDescriptor (Flink's SplitEnumerator on the
  JobManager, FLIP-27). It calls ``Sink.prepare`` before scheduling, ``Sink.commit`` with the
  committables of the finished attempts when every task finished, and ``Sink.abort`` when the job
  fails or is cancelled (two-phase commit: nothing partial or duplicated is ever visible).
- ``flintlock.runtime.spark`` reads splits and writes sink output; it dispatches on the object's
  type. The JobMaster side uses only ``pyarrow.fs``, never Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Sink", "Source"]


@runtime_checkable
class Source(Protocol):
    """A bounded source whose splits are enumerated on the JobMaster."""

    def describe(self) -> str:
        """A short description for plan JSON and the UI (``"Parquet: /data/lineitem"``)."""
        ...

    def output_schema(self) -> str | None:
        """The schema as a Spark DDL string when known up front, else ``None``."""
        ...

    def enumerate_splits(self, parallelism: int) -> list[list[Any]]:
        """Assign this source's splits to ``parallelism`` subtasks (a list per subtask).

        Raises:
            SourceException: the input is missing or unreadable; the message names the path.
        """
        ...

    # Optional: ``infer_parallelism(upper_bound: int, data_volume_per_task: int) -> int``, the
    # subtasks this source needs (Flink ``DynamicParallelismInference``); the
    # AdaptiveBatchScheduler asks it for sources whose parallelism the program did not set.


@runtime_checkable
class Sink(Protocol):
    """A sink written by tasks and committed by the JobMaster."""

    def describe(self) -> str:
        ...

    def prepare(self, job_id: str) -> None:
        """Before scheduling: check the target (e.g. the output path may not hold data).

        Raises:
            SinkException: the target cannot be written; the message names it.
        """
        ...

    def commit(self, job_id: str, committables: Sequence[Any]) -> None:
        """Publish the finished attempts' output (``committables`` in subtask order). Idempotent."""
        ...

    def abort(self, job_id: str, committables: Sequence[Any]) -> None:
        """Delete whatever attempts wrote (job failed or cancelled). Idempotent."""
        ...

    # Optional: ``supports_concurrent_execution_attempts = True`` (Flink
    # ``SupportsConcurrentExecutionAttempts``): several attempts of one subtask may write at
    # once and only the finished one's committable is published, so speculative execution may
    # run slow subtasks of its vertex again. Absent: never speculated.
