"""What an attached client tells its user about failures and restarts while a job runs (pure).

``FailoverReporter.update(snapshot, now_ms)`` compares a job snapshot with the previous one and
returns the new lines, oldest event first:

- each new exception history entry (a root failure or one that joined its failover)::

    Subtask 'Map (2/2)' attempt 0 failed on tm-1: ValueError: boom

- each restart the job started (the restart counter went up), with the subtasks being restarted
  and the time left until the restart may begin::

    Job RESTARTING: restarting 2 subtasks (restart #1, next attempt in 1.0 s)

- the job running again after a restart::

    Job RUNNING

The client prints them above its progress bars, or as plain lines to stderr without a terminal
(``flintlock.client.progress``). Flink's CLI prints nothing of the kind; its web UI shows the same
facts (exception history, job status, attempt numbers).
"""

from __future__ import annotations

import re

from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph, ExceptionHistoryEntry
from flintlock.runtime.jobgraph.types import JobStatus

__all__ = ["FailoverReporter", "describe_entry", "error_summary"]

_TASK_NAME = re.compile(r"^(?P<subtask>.*\(\d+/\d+\))#(?P<attempt>\d+)$")
_RESTARTING_STATES = ("FAILED", "CANCELED", "CANCELING")
_MAX_MESSAGE = 300


def error_summary(class_name: str, message: str | None, stacktrace: str = "") -> str:
    """``"<SimpleClassName>: <first line of the message>"``, shortened to a few hundred chars.

    Without a message (an entry read from REST, which carries only the stack trace) the message is
    taken from the stack trace's last line naming the exception class.
    """
    simple = class_name.rsplit(".", 1)[-1]
    text = (message or "").strip()
    if not text and stacktrace:
        for line in reversed(stacktrace.strip().splitlines()):
            stripped = line.strip()
            for name in (class_name, simple):
                if stripped.startswith(name + ":"):
                    text = stripped[len(name) + 1:].strip()
                    break
            if text:
                break
        if not text:
            first = stacktrace.strip().splitlines()[0].strip()
            text = first[len(simple) + 1:].strip() if first.startswith(simple + ":") else first
    first_line = text.splitlines()[0] if text else ""
    if len(first_line) > _MAX_MESSAGE:
        first_line = first_line[: _MAX_MESSAGE - 1] + "…"
    return f"{simple}: {first_line}" if first_line else simple


def describe_entry(entry: ExceptionHistoryEntry) -> str:
    """One line about one failure: which subtask attempt failed, where, and why."""
    why = error_summary(entry.error.class_name, entry.error.message, entry.error.traceback)
    where = f" on {entry.location}" if entry.location else ""
    if not entry.task_name:
        return f"Job failure{where}: {why}"
    match = _TASK_NAME.match(entry.task_name)
    if match is None:
        return f"Task '{entry.task_name}' failed{where}: {why}"
    return f"Subtask '{match['subtask']}' attempt {match['attempt']} failed{where}: {why}"


def _entry_key(entry: ExceptionHistoryEntry) -> tuple[int, str | None, str]:
    return entry.timestamp_ms, entry.task_name, entry.error.class_name


class FailoverReporter:
    """Remembers what was reported; ``update`` returns the lines about what is new."""

    def __init__(self) -> None:
        self._seen: set[tuple[int, str | None, str]] = set()
        self._state: JobStatus | None = None
        self._restarts = 0

    def update(self, graph: ArchivedExecutionGraph, now_ms: int) -> list[str]:
        """Lines about the failures and restarts since the previous snapshot (oldest first)."""
        lines = []
        for entry in sorted(graph.exception_history, key=lambda e: e.timestamp_ms):
            key = _entry_key(entry)
            if key not in self._seen:
                self._seen.add(key)
                lines.append(describe_entry(entry))
        restarted = graph.number_of_restarts > self._restarts
        if restarted:
            for restart in range(self._restarts + 1, graph.number_of_restarts + 1):
                latest = restart == graph.number_of_restarts
                lines.append(self._restart_line(graph, restart, now_ms if latest else None))
            self._restarts = graph.number_of_restarts
        elif graph.state is JobStatus.RESTARTING and self._state is not JobStatus.RESTARTING:
            # a restart that did not count as a new attempt (exponential-delay merges failures)
            lines.append(self._restart_line(graph, None, now_ms))
        if (graph.state is JobStatus.RUNNING and graph.number_of_restarts > 0
                and (restarted or self._state is not JobStatus.RUNNING)):
            lines.append("Job RUNNING")
        elif graph.state is JobStatus.FINISHED and (restarted or self._state is JobStatus.RESTARTING):
            # restarted, ran and finished between two snapshots: a job finishes only from RUNNING
            lines.append("Job RUNNING")
        self._state = graph.state
        return lines

    @staticmethod
    def _restart_line(graph: ArchivedExecutionGraph, restart: int | None,
                      now_ms: int | None) -> str:
        """``restart`` None: a restart that is not a new attempt; ``now_ms`` None: an earlier
        restart already over (only its number is known)."""
        if graph.state is not JobStatus.RESTARTING or now_ms is None:
            return f"Job RESTARTING: restart #{restart}" if restart is not None else "Job RESTARTING"
        pending = sum(1 for v in graph.vertices for s in v.subtasks
                      if s.state.name in _RESTARTING_STATES)
        details = [f"restart #{restart}"] if restart is not None else []
        if graph.next_restart_attempt_ms is not None:
            wait_s = max(0, graph.next_restart_attempt_ms - now_ms) / 1000
            details.append(f"next attempt in {wait_s:.1f} s")
        plural = "s" if pending != 1 else ""
        suffix = f" ({', '.join(details)})" if details else ""
        return f"Job RESTARTING: restarting {pending} subtask{plural}{suffix}"
