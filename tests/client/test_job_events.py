"""What the attached client prints about failures and restarts (pure reporter, rich display, the
REST round trip of the exception history). No cluster, no Spark."""

from __future__ import annotations

import io

from rich.console import Console

from flintlock.client.job_events import FailoverReporter, describe_entry, error_summary
from flintlock.client.progress import follow_job
from flintlock.client.remote import _archived_from_rest, _history_from_rest
from flintlock.runtime.executiongraph.archived import (
    ArchivedExecution,
    ArchivedExecutionGraph,
    ArchivedJobVertex,
    ExceptionHistoryEntry,
)
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID, JobID, JobVertexID
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus, JobType
from flintlock.runtime.rest import messages
from flintlock.runtime.taskmanager.task_execution_state import SerializedError

JOB = JobID("0123456789abcdef0123456789abcdef")
MAP = JobVertexID("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
T0 = 1_700_000_000_000
BOOM = SerializedError("flintlock.runtime.spark.errors.OperatorException",
                       "Map failed: RuntimeError: injected (in the Spark Python worker)\nmore",
                       "Traceback (most recent call last):\n  ...\n"
                       "flintlock.runtime.spark.errors.OperatorException: Map failed: RuntimeError: "
                       "injected (in the Spark Python worker)\nmore")


def _entry(ts: int, index: int, attempt: int = 0, concurrent: bool = False) -> ExceptionHistoryEntry:
    return ExceptionHistoryEntry(BOOM, ts, f"Map ({index + 1}/2)#{attempt}", f"tm-{index}",
                                 ExecutionAttemptID(ExecutionVertexID(MAP, index), attempt, "x"),
                                 concurrent=concurrent)


def _graph(state: JobStatus, states: tuple[ExecutionState, ExecutionState], restarts: int = 0,
           history: tuple[ExceptionHistoryEntry, ...] = (),
           next_restart: int | None = None) -> ArchivedExecutionGraph:
    subtasks = tuple(
        ArchivedExecution(ExecutionAttemptID(ExecutionVertexID(MAP, i), 0, "x"), s, f"tm-{i}", {})
        for i, s in enumerate(states))
    return ArchivedExecutionGraph(
        JOB, "job", JobType.BATCH, state, {"INITIALIZING": T0},
        (ArchivedJobVertex(MAP, "Map", 2, 128, "default", subtasks),),
        exception_history=history, number_of_restarts=restarts,
        next_restart_attempt_ms=next_restart)


R, F, C = ExecutionState.RUNNING, ExecutionState.FAILED, ExecutionState.CANCELING


def test_error_summary_is_one_short_line() -> None:
    assert error_summary("builtins.ValueError", "boom\nsecond line") == "ValueError: boom"
    assert error_summary("a.b.KeyError", "", "Traceback ...\n  x\na.b.KeyError: 'k'\n") == "KeyError: 'k'"
    assert error_summary("E", "", "E: only line") == "E: only line"
    assert error_summary("E", "x" * 1000).endswith("…") and len(error_summary("E", "x" * 1000)) < 310
    assert describe_entry(ExceptionHistoryEntry(SerializedError("E", "m"), T0)) == "Job failure: E: m"


def test_a_failure_a_restart_and_running_again_each_print_once() -> None:
    reporter = FailoverReporter()
    assert reporter.update(_graph(JobStatus.RUNNING, (R, R)), T0) == []
    restarting = _graph(JobStatus.RESTARTING, (F, C), 1, (_entry(T0 + 5, 0),),
                        next_restart=T0 + 2_000)
    assert reporter.update(restarting, T0 + 500) == [
        "Subtask 'Map (1/2)' attempt 0 failed on tm-0: OperatorException: Map failed: "
        "RuntimeError: injected (in the Spark Python worker)",
        "Job RESTARTING: restarting 2 subtasks (restart #1, next attempt in 1.5 s)",
    ]
    assert reporter.update(restarting, T0 + 900) == []  # nothing new
    # a second failure joins the pending failover: printed, but no new restart line
    joined = _graph(JobStatus.RESTARTING, (F, F), 1, (_entry(T0 + 5, 0), _entry(T0 + 7, 1, 0, True)),
                    next_restart=T0 + 2_000)
    assert reporter.update(joined, T0 + 1000) == [
        "Subtask 'Map (2/2)' attempt 0 failed on tm-1: OperatorException: Map failed: "
        "RuntimeError: injected (in the Spark Python worker)"]
    assert reporter.update(_graph(JobStatus.RUNNING, (R, R), 1, joined.exception_history),
                           T0 + 3000) == ["Job RUNNING"]
    assert reporter.update(_graph(JobStatus.FINISHED, (R, R), 1, joined.exception_history),
                           T0 + 4000) == []


def test_a_job_that_restarted_and_finished_between_looks_is_reported_running_again() -> None:
    reporter = FailoverReporter()
    reporter.update(_graph(JobStatus.RUNNING, (R, R)), T0)
    history = (_entry(T0 + 5, 0),)
    restarting = _graph(JobStatus.RESTARTING, (F, C), 1, history, next_restart=T0 + 1_000)
    assert reporter.update(restarting, T0 + 100)[-1].startswith("Job RESTARTING")
    # the next look already sees FINISHED: the job ran again in between (FINISHED only follows RUNNING)
    assert reporter.update(_graph(JobStatus.FINISHED, (R, R), 1, history), T0 + 3000) == ["Job RUNNING"]


def test_restarts_missed_between_looks_are_still_counted() -> None:
    reporter = FailoverReporter()
    reporter.update(_graph(JobStatus.RUNNING, (R, R)), T0)
    lines = reporter.update(_graph(JobStatus.RUNNING, (R, R), 2, (_entry(T0 + 1, 0),
                                                                  _entry(T0 + 9, 0, 1))), T0 + 10)
    assert lines == [
        "Subtask 'Map (1/2)' attempt 0 failed on tm-0: OperatorException: Map failed: RuntimeError: "
        "injected (in the Spark Python worker)",
        "Subtask 'Map (1/2)' attempt 1 failed on tm-0: OperatorException: Map failed: RuntimeError: "
        "injected (in the Spark Python worker)",
        "Job RESTARTING: restart #1", "Job RESTARTING: restart #2", "Job RUNNING"]


def test_lines_are_printed_above_the_live_progress_bars() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    snapshots = iter([
        _graph(JobStatus.RUNNING, (R, R)),
        _graph(JobStatus.RESTARTING, (F, C), 1, (_entry(T0, 0),), next_restart=T0 + 1000),
        _graph(JobStatus.RUNNING, (R, R), 1, (_entry(T0, 0),)),
    ])
    seen: list[ArchivedExecutionGraph] = []
    reporter = FailoverReporter()

    def snapshot() -> ArchivedExecutionGraph:
        seen.append(next(snapshots))
        return seen[-1]

    follow_job(snapshot, lambda: len(seen) == 2, console, interval_s=0,
               report=lambda g: reporter.update(g, T0))
    text = out.getvalue()
    failed = text.index("Subtask 'Map (1/2)' attempt 0 failed on tm-0")
    restart = text.index("Job RESTARTING: restarting 2 subtasks (restart #1, next attempt in 1.0 s)")
    running = text.index("Job RUNNING")
    assert failed < restart < running
    assert "Map" in text[running:]  # the bars are drawn again below the printed lines


def test_the_rest_exception_history_reads_back_into_the_same_failovers() -> None:
    history = (_entry(T0, 0), _entry(T0 + 1, 1, 0, True), _entry(T0 + 50, 0, 1))
    graph = _graph(JobStatus.RESTARTING, (F, C), 2, history, next_restart=T0 + 1234)
    flat = _history_from_rest(messages.job_exceptions(graph, 20))
    assert [(e.task_name, e.timestamp_ms, e.location, e.concurrent) for e in flat] == [
        ("Map (1/2)#0", T0, "tm-0", False), ("Map (2/2)#0", T0 + 1, "tm-1", True),
        ("Map (1/2)#1", T0 + 50, "tm-0", False)]
    assert describe_entry(flat[0]) == describe_entry(history[0])  # message read from the trace
    details = messages.job_details_info(graph, T0 + 100)
    back = _archived_from_rest(details, flat)
    assert (back.state, back.number_of_restarts, back.next_restart_attempt_ms) == (
        JobStatus.RESTARTING, 2, T0 + 1234)
    assert _archived_from_rest(messages.job_details_info(
        _graph(JobStatus.RUNNING, (R, R)), T0)).next_restart_attempt_ms is None
