"""Exception history and restart status over REST: grouping per failover, bounds, RESTARTING.

Layer 1-2: ``group_exception_history`` and ``messages`` on hand-made snapshots, the REST app on a
testing Dispatcher, and the pure scheduler core driven with events (ManualClock) for the data the
scheduler records (concurrent failures of a lost TaskManager, the time of the next restart).
"""

from __future__ import annotations

from typing import Any

import pytest

from flintlock.config.configuration import Configuration
from flintlock.runtime.clock import ManualClock
from flintlock.runtime.executiongraph.archived import (
    ArchivedExecution,
    ArchivedExecutionGraph,
    ArchivedJobVertex,
    ExceptionHistoryEntry,
    group_exception_history,
)
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.ids import (
    AllocationID,
    ExecutionAttemptID,
    ExecutionVertexID,
    JobID,
    JobVertexID,
    ResourceID,
)
from flintlock.runtime.jobgraph.job_graph import JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus, JobType
from flintlock.runtime.rest import messages
from flintlock.runtime.scheduler.default_scheduler import DefaultScheduler
from flintlock.runtime.scheduler.messages import (
    Command,
    DeployTask,
    Event,
    ScheduleTimer,
    StartScheduling,
    TaskExecutionStateChanged,
    TaskManagerLost,
)
from flintlock.runtime.taskexecutor.gateway import SlotOffer
from flintlock.runtime.taskmanager.task_execution_state import SerializedError, TaskExecutionState

JOB = JobID("0123456789abcdef0123456789abcdef")
MAP = JobVertexID("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
T0 = 1_700_000_000_000
ROOT_KEYS = {"exceptionName", "stacktrace", "timestamp", "taskName", "endpoint", "taskManagerId",
             "failureLabels", "concurrentExceptions",
             # flintlock additions: the failed attempt and its task log
             "vertexId", "subtaskIndex", "attemptNumber", "logUrl"}


def _attempt(index: int, attempt: int = 0) -> ExecutionAttemptID:
    return ExecutionAttemptID(ExecutionVertexID(MAP, index), attempt, "n0nce")


def _entry(ts: int, index: int, attempt: int = 0, concurrent: bool = False,
           error: str = "boom") -> ExceptionHistoryEntry:
    return ExceptionHistoryEntry(
        SerializedError("ValueError", error, f"Traceback...\nValueError: {error}"), ts,
        f"Map ({index + 1}/3)#{attempt}", f"tm-{index}:6121", _attempt(index, attempt),
        concurrent=concurrent)


def _graph(history: tuple[ExceptionHistoryEntry, ...], state: JobStatus = JobStatus.RUNNING,
           configuration: dict[str, str] | None = None) -> ArchivedExecutionGraph:
    subtasks = tuple(
        ArchivedExecution(_attempt(i, 1), ExecutionState.RUNNING, f"tm-{i}",
                          {"CREATED": T0, "DEPLOYING": T0 + 1, "RUNNING": T0 + 2})
        for i in range(3))
    prior = tuple(ArchivedExecution(_attempt(i), ExecutionState.FAILED, f"tm-{i}", {"FAILED": T0})
                  for i in range(3))
    return ArchivedExecutionGraph(
        JOB, "job", JobType.BATCH, state, {"INITIALIZING": T0, "RUNNING": T0},
        (ArchivedJobVertex(MAP, "Map", 3, 128, "default", subtasks, prior),),
        configuration=configuration or {}, exception_history=history)


# ---- grouping and bounds ---------------------------------------------------------------------------


def test_concurrent_entries_join_the_root_before_them() -> None:
    a, b, c, d = _entry(10, 0), _entry(11, 1, concurrent=True), _entry(12, 2, concurrent=True), _entry(20, 0, 1)
    roots = group_exception_history([a, b, c, d])
    assert [(r.root, r.concurrent) for r in roots] == [(a, (b, c)), (d, ())]
    # a concurrent entry whose root fell out of a bounded history stands alone
    assert [(r.root, r.concurrent) for r in group_exception_history([c, d])] == [(c, ()), (d, ())]
    assert _entry(12, 2, concurrent=True) == _entry(12, 2)  # the flag is not part of equality


def test_rest_groups_concurrent_failures_and_names_their_task_managers(rest) -> None:
    history = (_entry(T0 + 10, 0), _entry(T0 + 11, 1, concurrent=True),
               _entry(T0 + 12, 2, concurrent=True), _entry(T0 + 50, 1, 1, error="again"))
    rest.on("request_job", lambda job_id: _graph(history, JobStatus.RESTARTING))
    body = rest.client.get(f"/v1/jobs/{JOB}/exceptions").json()
    newest, first = body["exceptionHistory"]["entries"]
    assert set(newest) == set(first) == ROOT_KEYS
    assert (newest["taskName"], newest["concurrentExceptions"]) == ("Map (2/3)#1", [])
    assert first["taskName"] == "Map (1/3)#0" and first["timestamp"] == T0 + 10
    concurrent = first["concurrentExceptions"]
    assert [c["taskName"] for c in concurrent] == ["Map (2/3)#0", "Map (3/3)#0"]
    assert set(concurrent[0]) == ROOT_KEYS - {"concurrentExceptions"}
    assert [c["taskManagerId"] for c in concurrent] == ["tm-1", "tm-2"]  # the attempts' TMs
    assert [c["endpoint"] for c in concurrent] == ["tm-1:6121", "tm-2:6121"]
    assert [(c["subtaskIndex"], c["attemptNumber"]) for c in concurrent] == [(1, 0), (2, 0)]
    assert newest["logUrl"] == (
        f"/taskmanagers/tm-1/logs/task-{JOB}-{newest['vertexId']}-1-1.log")
    assert body["exceptionHistory"]["truncated"] is False
    # legacy fields while restarting: the latest failure (Flink 1.x failure info)
    assert body["root-exception"].endswith("ValueError: again") and body["timestamp"] == T0 + 50


def _roots(n: int) -> tuple[ExceptionHistoryEntry, ...]:
    return tuple(_entry(T0 + 10 * k, k % 3, k // 3, error=f"e{k}") for k in range(n))


def _shown(body: dict[str, Any]) -> list[str]:
    return [e["stacktrace"].rsplit(" ", 1)[-1] for e in body["exceptionHistory"]["entries"]]


def test_max_exceptions_and_history_size_bound_the_root_entries(rest, make_rest) -> None:
    rest.on("request_job", lambda job_id: _graph(_roots(20)))
    body = rest.client.get(f"/jobs/{JOB}/exceptions").json()
    assert _shown(body) == [f"e{k}" for k in range(19, 3, -1)]  # default size 16, newest first
    assert body["exceptionHistory"]["truncated"] is True
    body = rest.client.get(f"/jobs/{JOB}/exceptions?maxExceptions=3").json()
    assert _shown(body) == ["e19", "e18", "e17"] and body["exceptionHistory"]["truncated"] is True
    rest.on("request_job", lambda job_id: _graph(_roots(3)))
    body = rest.client.get(f"/jobs/{JOB}/exceptions?maxExceptions=3").json()
    assert _shown(body) == ["e2", "e1", "e0"] and body["exceptionHistory"]["truncated"] is False
    # cluster-wide size, and a job's own size overriding it
    small = make_rest({"web.exception-history-size": 2})
    small.on("request_job", lambda job_id: _graph(_roots(5)))
    assert _shown(small.client.get(f"/jobs/{JOB}/exceptions").json()) == ["e4", "e3"]
    small.on("request_job", lambda job_id: _graph(_roots(5), configuration={
        "web.exception-history-size": "4"}))
    body = small.client.get(f"/jobs/{JOB}/exceptions").json()
    assert _shown(body) == ["e4", "e3", "e2", "e1"] and body["exceptionHistory"]["truncated"]


def test_history_size_must_be_positive() -> None:
    from flintlock.config import IllegalConfigurationException

    with pytest.raises(IllegalConfigurationException, match="web.exception-history-size"):
        Configuration({"web.exception-history-size": 0})


# ---- what the scheduler records: concurrent failures and the next restart time ---------------------


class _Driver:
    """The scheduler core of a one-vertex job (parallelism 2, two regions) on a ManualClock."""

    def __init__(self, **conf: str) -> None:
        self.clock = ManualClock()
        vertex = JobVertex(JobVertexID.generate(), "Map", 2, 128, "tests:Noop")
        job = JobGraph(JobID.generate(), "job", JobType.BATCH, (vertex,))
        self.graph = ExecutionGraph(job, self.clock.now_ms)
        self.scheduler = DefaultScheduler(self.graph, Configuration(conf), self.clock,
                                          validate=True)
        self._due: list[Event] = []

    def _collect(self, commands: list[Command]) -> list[Command]:
        for c in commands:
            if isinstance(c, ScheduleTimer):
                self.clock.call_later(c.delay_s, lambda e=c.event: self._due.append(e))
        return commands

    def handle(self, event: Event) -> list[Command]:
        return self._collect(self.scheduler.handle(event))

    def start_on(self, tm: ResourceID) -> list[ExecutionAttemptID]:
        self.handle(StartScheduling())
        offers = tuple(SlotOffer(AllocationID.generate(), i) for i in range(2))
        _, cmds = self.scheduler.offer_slots(tm, f"inproc://{tm}", offers)
        attempts = [c.tdd.attempt_id for c in self._collect(cmds) if isinstance(c, DeployTask)]
        for a in attempts:
            self.report(a, ExecutionState.RUNNING, str(tm))
        return attempts

    def report(self, attempt: ExecutionAttemptID, state: ExecutionState, tm: str = "",
               error: SerializedError | None = None) -> None:
        self.handle(TaskExecutionStateChanged(TaskExecutionState(
            self.graph.job_id, attempt, state, error=error, task_manager=tm)))

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        while self._due:
            self.handle(self._due.pop(0))


_FIXED_DELAY = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "5",
                "restart-strategy.fixed-delay.delay": "10 s"}


def test_the_other_tasks_of_a_lost_task_manager_are_concurrent_failures() -> None:
    d = _Driver(**_FIXED_DELAY)
    tm = ResourceID("tm-1")
    d.start_on(tm)
    d.handle(TaskManagerLost(tm, "heartbeat timed out"))
    assert d.graph.state is JobStatus.RESTARTING
    body = messages.job_exceptions(d.graph.archive(), 20)
    (root,) = body["exceptionHistory"]["entries"]
    assert root["taskName"] == "Map (1/2)#0" and root["exceptionName"].endswith(
        "TaskManagerLostException")
    assert [c["taskName"] for c in root["concurrentExceptions"]] == ["Map (2/2)#0"]
    assert "TaskManager tm-1 is lost" in root["concurrentExceptions"][0]["stacktrace"]


def test_job_details_show_restarting_with_the_next_attempt_and_the_restart_count() -> None:
    d = _Driver(**_FIXED_DELAY)
    a0, _ = d.start_on(ResourceID("tm-1"))
    failed_at = d.clock.now_ms()
    d.report(a0, ExecutionState.FAILED, "tm-1", SerializedError("ValueError", "flaky"))
    details = messages.job_details_info(d.graph.archive(), d.clock.now_ms())
    assert details["state"] == "RESTARTING"
    assert details["next-restart-time"] == failed_at + 10_000
    assert details["numRestarts"] == 1
    d.advance(10.0)
    archived = d.graph.archive()
    details = messages.job_details_info(archived, d.clock.now_ms())
    assert (details["state"], details["next-restart-time"], details["numRestarts"]) == (
        "RUNNING", -1, 1)
    vertex = messages.job_vertex_details(archived.job_id, archived.vertices[0], d.clock.now_ms())
    assert [(s["subtask"], s["attempt"]) for s in vertex["subtasks"]] == [(0, 1), (1, 0)]
