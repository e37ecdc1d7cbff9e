"""Sinks without a commit step: ``PrintSink`` (Flink's print()) and ``CollectSink`` (collect()).

The Task does the work (``flintlock.runtime.spark``): ``PrintSink`` rows are printed through
``RuntimeEnvironment.print_fn`` in Flink's ``PrintSinkOutputWriter`` format; ``CollectSink`` rows are
returned as an Arrow IPC stream in ``TaskResult.accumulators["collect-<uid>/<subtask>"]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["CollectSink", "PrintSink"]


class _SinkWithoutCommit:
    """A sink with nothing to prepare, commit or abort (the Task does all the work)."""

    def prepare(self, job_id: str) -> None:
        return None

    def commit(self, job_id: str, committables: Sequence[Any]) -> None:
        return None

    def abort(self, job_id: str, committables: Sequence[Any]) -> None:
        return None


class PrintSink(_SinkWithoutCommit):
    """Print each row as ``<prefix>:<subtask>> Row(...)`` (subtask 1-based, only if parallelism > 1).

    Args:
        prefix: Flink's sink identifier; ``None`` prints no identifier.
    """

    def __init__(self, prefix: str | None = None) -> None:
        self.prefix = prefix

    def line_prefix(self, subtask_index: int, parallelism: int) -> str:
        """Flink ``PrintSinkOutputWriter.open``: ``"id:3> "``, ``"3> "``, ``"id> "`` or ``""``."""
        text = self.prefix or ""
        if parallelism > 1:
            text = f"{text}:{subtask_index + 1}" if text else str(subtask_index + 1)
        return f"{text}> " if text else ""

    def describe(self) -> str:
        return "Print to Std. Out" if not self.prefix else f"Print to Std. Out ({self.prefix})"


class CollectSink(_SinkWithoutCommit):
    """Return the rows to the client (``DataStream.execute_and_collect``)."""

    #: the rows travel with the finished attempt's result: a losing attempt's never arrive
    supports_concurrent_execution_attempts = True

    def __init__(self, uid: str) -> None:
        self.uid = uid

    def accumulator_name(self, subtask_index: int) -> str:
        return f"collect-{self.uid}/{subtask_index}"

    def describe(self) -> str:
        return f"Collect Sink ({self.uid})"
