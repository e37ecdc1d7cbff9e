"""Flink REST v1 subtask, job config and task metric endpoints: shapes, lookups, bad input."""

from __future__ import annotations

import dataclasses

import pytest

from flintlock.runtime.executiongraph.archived import (
    ArchivedExecution,
    ArchivedExecutionGraph,
    ArchivedJobVertex,
)
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID, JobID, JobVertexID
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus, JobType
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics, SerializedError

PREFIXES = pytest.mark.parametrize("prefix", ["/v1", ""])

JOB = JobID("0123456789abcdef0123456789abcdef")
SRC = JobVertexID("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
MAP = JobVertexID("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
T0 = 1_700_000_000_000
NOW = 1_700_000_100_000  # the harness's clock (conftest.NOW_MS)
BOOM = SerializedError("ValueError", "boom", "Traceback ...\nValueError: boom")


def _attempt(vertex: JobVertexID, index: int, attempt: int = 0) -> ExecutionAttemptID:
    return ExecutionAttemptID(ExecutionVertexID(vertex, index), attempt, "n0nce")


def _graph() -> ArchivedExecutionGraph:
    src = tuple(
        ArchivedExecution(
            _attempt(SRC, i), ExecutionState.FINISHED, "tm-1",
            {"CREATED": T0, "SCHEDULED": T0 + 10, "DEPLOYING": T0 + 20, "RUNNING": T0 + 30,
             "FINISHED": T0 + 130},
            metrics=IOMetrics(records_in=0, records_out=50 + 10 * i, bytes_in=0, bytes_out=500),
        )
        for i in range(2)
    )
    current = (
        ArchivedExecution(_attempt(MAP, 0, 1), ExecutionState.RUNNING, "tm-2",
                          {"CREATED": T0, "DEPLOYING": T0 + 200, "RUNNING": T0 + 210}),
        ArchivedExecution(_attempt(MAP, 1), ExecutionState.CREATED, None, {"CREATED": T0}),
    )
    prior = (
        ArchivedExecution(_attempt(MAP, 0, 0), ExecutionState.FAILED, "tm:1",
                          {"CREATED": T0, "DEPLOYING": T0 + 100, "RUNNING": T0 + 110,
                           "FAILED": T0 + 150}, failure=BOOM),
    )
    return ArchivedExecutionGraph(
        job_id=JOB, name="wordcount", job_type=JobType.BATCH, state=JobStatus.RUNNING,
        state_timestamps={"INITIALIZING": T0 - 100, "RUNNING": T0},
        vertices=(
            ArchivedJobVertex(SRC, "Source: numbers", 2, 128, "default", src),
            ArchivedJobVertex(MAP, "Map", 2, 128, "default", current, prior),
        ),
        configuration={"parallelism.default": "2", "restart-strategy.type": "fixed-delay",
                       "pipeline.name": "wordcount"},
    )


@pytest.fixture
def job(rest):
    rest.on("request_job", lambda job_id: _graph())
    return rest


@PREFIXES
def test_job_config(job, prefix):
    assert job.client.get(f"{prefix}/jobs/{JOB}/config").json() == {
        "jid": str(JOB), "name": "wordcount",
        "execution-config": {
            "execution-mode": "BATCH", "restart-strategy": "fixed-delay", "job-parallelism": 2,
            "object-reuse-mode": False,
            "user-config": {"parallelism.default": "2", "pipeline.name": "wordcount",
                            "restart-strategy.type": "fixed-delay"},
        },
    }


@PREFIXES
def test_subtasktimes(job, prefix):
    body = job.client.get(f"{prefix}/jobs/{JOB}/vertices/{SRC}/subtasktimes").json()
    assert (body["id"], body["name"], body["now"]) == (str(SRC), "Source: numbers", NOW)
    first = body["subtasks"][0]
    assert first["subtask"] == 0 and first["endpoint"] == "tm-1"
    assert first["duration"] == 110  # FINISHED - DEPLOYING
    assert set(first["timestamps"]) == {s.name for s in ExecutionState}
    assert first["timestamps"]["RUNNING"] == T0 + 30 and first["timestamps"]["FAILED"] == 0


@PREFIXES
def test_current_attempt_of_a_subtask_links_its_log(job, prefix):
    body = job.client.get(f"{prefix}/jobs/{JOB}/vertices/{MAP}/subtasks/0").json()
    assert {k: body[k] for k in ("subtask", "status", "attempt", "endpoint", "taskmanager-id",
                                 "start-time", "end-time", "duration")} == {
        "subtask": 0, "status": "RUNNING", "attempt": 1, "endpoint": "tm-2",
        "taskmanager-id": "tm-2", "start-time": T0 + 200, "end-time": -1,
        "duration": NOW - (T0 + 200),
    }
    assert body["status-duration"]["DEPLOYING"] == 10
    assert body["status-duration"]["RUNNING"] == NOW - (T0 + 210)
    assert body["metrics"]["accumulated-busy-time"] == NOW - (T0 + 210)
    assert body["metrics"]["write-records-complete"] is False
    assert body["attempts"] == [0, 1]
    assert body["log-file"] == f"task-{JOB}-{MAP}-0-1.log"
    assert body["log-url"] == f"/taskmanagers/tm-2/logs/task-{JOB}-{MAP}-0-1.log"
    assert body["failure"] is None


@PREFIXES
def test_prior_attempt_with_failure(job, prefix):
    body = job.client.get(f"{prefix}/jobs/{JOB}/vertices/{MAP}/subtasks/0/attempts/0").json()
    assert (body["status"], body["attempt"], body["end-time"]) == ("FAILED", 0, T0 + 150)
    assert body["failure"] == {"class": "ValueError", "message": "boom"}
    # the TaskManager id is URL-encoded in the link
    assert body["log-url"] == f"/taskmanagers/tm%3A1/logs/task-{JOB}-{MAP}-0-0.log"


def test_unassigned_attempt_has_no_log_url(job):
    body = job.client.get(f"/jobs/{JOB}/vertices/{MAP}/subtasks/1").json()
    assert body["taskmanager-id"] == "(unassigned)"
    assert body["log-url"] is None and body["start-time"] == -1


@pytest.mark.parametrize(("path", "status"), [
    (f"/jobs/{JOB}/vertices/{MAP}/subtasks/2", 404),
    (f"/jobs/{JOB}/vertices/{MAP}/subtasks/0/attempts/7", 404),
    (f"/jobs/{JOB}/vertices/{'c' * 32}/subtasks/0", 404),
    (f"/jobs/{JOB}/vertices/not-hex/subtasks/0", 400),
    ("/jobs/nope/config", 400),
    (f"/jobs/{JOB}/vertices/{MAP}/subtasks/x", 404),
])
def test_bad_lookups(job, path, status):
    r = job.client.get(path)
    assert r.status_code == status, r.text
    assert r.json()["errors"]


def test_vertex_taskmanagers(job):
    body = job.client.get(f"/jobs/{JOB}/vertices/{SRC}/taskmanagers").json()
    (tm,) = body["taskmanagers"]
    assert (tm["taskmanager-id"], tm["status"], tm["start-time"], tm["end-time"]) == (
        "tm-1", "FINISHED", T0 + 20, T0 + 130)
    assert tm["status-counts"]["FINISHED"] == 2
    assert tm["metrics"]["write-records"] == 110
    # Flink's AggregatedTaskDetailsInfo statistics (Java longs)
    assert tm["aggregated"]["metrics"]["write-records"] == {
        "min": 50, "max": 60, "avg": 55, "sum": 110, "median": 55, "p25": 50, "p75": 60,
        "p95": 60}


# ---- task metrics --------------------------------------------------------------------------------


@PREFIXES
def test_vertex_metrics_list_and_get(job, prefix):
    url = f"{prefix}/jobs/{JOB}/vertices/{SRC}/metrics"
    ids = [m["id"] for m in job.client.get(url).json()]
    assert "0.numRecordsOut" in ids and "1.numBytesIn" in ids and "1.busyTimeMsPerSecond" in ids
    body = job.client.get(url, params={"get": "0.numRecordsOut,1.numRecordsOut,nope"}).json()
    assert body == [{"id": "0.numRecordsOut", "value": "50"},
                    {"id": "1.numRecordsOut", "value": "60"}]


def test_aggregated_subtask_metrics(job):
    url = f"/jobs/{JOB}/vertices/{SRC}/subtasks/metrics"
    assert {"id": "numRecordsOut"} in job.client.get(url).json()
    body = job.client.get(url, params={"get": "numRecordsOut,accumulateBusyTimeMs"}).json()
    assert body[0] == {"id": "numRecordsOut", "min": 50.0, "max": 60.0, "avg": 55.0,
                       "sum": 110.0, "skew": pytest.approx(5 / 55 * 100)}
    assert body[1]["id"] == "accumulateBusyTimeMs" and body[1]["sum"] == 200.0
    only = job.client.get(url, params={"get": "numRecordsOut", "agg": "max,sum",
                                       "subtasks": "1"}).json()
    assert only == [{"id": "numRecordsOut", "max": 60.0, "sum": 60.0}]


@pytest.mark.parametrize("params", [{"get": "numRecordsOut", "agg": "median"},
                                    {"get": "numRecordsOut", "subtasks": "3-1"},
                                    {"get": "bad name!"}])
def test_aggregated_subtask_metrics_rejects_bad_queries(job, params):
    r = job.client.get(f"/jobs/{JOB}/vertices/{SRC}/subtasks/metrics", params=params)
    assert r.status_code == 400
    assert "invalid query parameter" in r.json()["errors"][0]


def test_subtask_metrics(job):
    body = job.client.get(f"/jobs/{JOB}/vertices/{MAP}/subtasks/0/metrics",
                          params={"get": "busyTimeMsPerSecond,numRecordsIn"}).json()
    assert body == [{"id": "busyTimeMsPerSecond", "value": "1000"},
                    {"id": "numRecordsIn", "value": "0"}]


def test_job_metrics(rest):
    graph = dataclasses.replace(_graph(), state=JobStatus.RESTARTING, number_of_restarts=3,
                                state_timestamps={"RUNNING": T0, "RESTARTING": NOW - 700})
    rest.on("request_job", lambda job_id: graph)
    url = f"/jobs/{JOB}/metrics"
    assert {m["id"] for m in rest.client.get(url).json()} == {"numRestarts", "uptime",
                                                              "restartingTime"}
    body = rest.client.get(url, params={"get": "numRestarts,restartingTime,uptime"}).json()
    assert body == [{"id": "numRestarts", "value": "3"}, {"id": "restartingTime", "value": "700"},
                    {"id": "uptime", "value": "0"}]
