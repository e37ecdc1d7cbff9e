"""Flink REST v1 job and cluster endpoints: shapes, both path forms, and error bodies."""

from __future__ import annotations

import base64

import pytest

from flintlock.runtime.dispatcher.exceptions import FlinkJobNotFoundException
from flintlock.runtime.dispatcher.gateway import ClusterOverview
from flintlock.runtime.executiongraph.archived import (
    ArchivedExecution,
    ArchivedExecutionGraph,
    ArchivedJobVertex,
    ExceptionHistoryEntry,
    JobDetails,
    JobResult,
)
from flintlock.runtime.ids import (
    ExecutionAttemptID,
    ExecutionVertexID,
    JobID,
    JobVertexID,
    ResourceID,
)
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus, JobType
from flintlock.runtime.resourcemanager.gateway import (
    PendingTaskManagerInfo,
    ResourceOverview,
    TaskManagerInfo,
)
from flintlock.runtime.rpc.exceptions import RemoteError
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics, SerializedError

PREFIXES = pytest.mark.parametrize("prefix", ["/v1", ""])

JOB = JobID("0123456789abcdef0123456789abcdef")
SRC = JobVertexID("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
MAP = JobVertexID("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
T0 = 1_700_000_000_000
NOW_MS = 1_700_000_100_000  # the harness's clock (conftest.NOW_MS)


def _attempt(vertex: JobVertexID, index: int, attempt: int = 0) -> ExecutionAttemptID:
    return ExecutionAttemptID(ExecutionVertexID(vertex, index), attempt, "n0nce")


BOOM = SerializedError("ValueError", "boom", "Traceback (most recent call last):\nValueError: boom")


def _graph(state: JobStatus = JobStatus.RUNNING) -> ArchivedExecutionGraph:
    src_subtasks = tuple(
        ArchivedExecution(
            _attempt(SRC, i), ExecutionState.FINISHED, "tm-1",
            {"CREATED": T0, "SCHEDULED": T0 + 10, "DEPLOYING": T0 + 20, "RUNNING": T0 + 30,
             "FINISHED": T0 + 130},
            metrics=IOMetrics(records_in=0, records_out=50, bytes_in=0, bytes_out=500),
        )
        for i in range(2)
    )
    map_subtasks = (
        ArchivedExecution(
            _attempt(MAP, 0, 1), ExecutionState.RUNNING, "tm-2",
            {"CREATED": T0, "DEPLOYING": T0 + 200, "RUNNING": T0 + 210},
            metrics=IOMetrics(10, 5, 100, 50),
        ),
        ArchivedExecution(
            _attempt(MAP, 1), ExecutionState.FAILED, "tm-1",
            {"CREATED": T0, "DEPLOYING": T0 + 200, "RUNNING": T0 + 210, "FAILED": T0 + 300},
            failure=BOOM,
        ),
    )
    history = (
        ExceptionHistoryEntry(BOOM, T0 + 300, "Map (2/2)#0", "tm-1:1234", _attempt(MAP, 1)),
        ExceptionHistoryEntry(SerializedError("KeyError", "k"), T0 + 100, "Map (1/2)#0",
                              "tm-2:1234"),
    )
    return ArchivedExecutionGraph(
        job_id=JOB, name="wordcount", job_type=JobType.BATCH, state=state,
        state_timestamps={"INITIALIZING": T0 - 100, "CREATED": T0 - 50, "RUNNING": T0},
        vertices=(
            ArchivedJobVertex(SRC, "Source: numbers", 2, 128, "default", src_subtasks),
            ArchivedJobVertex(MAP, "Map", 2, 128, "default", map_subtasks),
        ),
        plan={"jid": str(JOB), "name": "wordcount", "type": "BATCH", "nodes": [
            {"id": str(SRC), "parallelism": 2, "operator": "", "operator_strategy": "",
             "description": "Source: numbers", "optimizer_properties": {}},
        ]},
        failure=history[0],
        exception_history=history,
    )


def _details(job_id: JobID = JOB, state: JobStatus = JobStatus.RUNNING) -> JobDetails:
    return JobDetails(job_id, "wordcount", T0, -1, 500, state, T0 + 300,
                      {"RUNNING": 1, "FINISHED": 2, "FAILED": 1})


def _unknown(job_id: JobID) -> None:
    raise FlinkJobNotFoundException(job_id)


# ---- cluster -------------------------------------------------------------------------------------


@PREFIXES
def test_config_has_flinks_dashboard_fields(rest, prefix):
    body = rest.client.get(f"{prefix}/config").json()
    assert set(body) == {"refresh-interval", "timezone-name", "timezone-offset", "flink-version",
                         "flink-revision", "features"}
    assert body["refresh-interval"] == 3000
    assert body["flink-version"] == "2.1-flintlock"
    assert isinstance(body["timezone-offset"], int)
    assert body["features"] == {"web-submit": True, "web-cancel": True, "web-rescale": False,
                                "web-history": False}


def test_config_follows_web_options(make_rest):
    h = make_rest({"web.refresh-interval": "500 ms", "web.submit.enable": "false"})
    body = h.client.get("/config").json()
    assert body["refresh-interval"] == 500
    assert body["features"]["web-submit"] is False


@PREFIXES
def test_overview(rest, prefix):
    rest.on("request_cluster_overview",
            lambda: ClusterOverview(ResourceOverview(2, 8, 3), 1, 4, 2, 1))
    assert rest.client.get(f"{prefix}/overview").json() == {
        "taskmanagers": 2, "slots-total": 8, "slots-available": 3, "taskmanagers-pending": 0,
        "jobs-running": 1,
        "jobs-finished": 4, "jobs-cancelled": 2, "jobs-failed": 1,
        "flink-version": "2.1-flintlock", "flink-commit": "unknown",
    }


def _tm(name: str = "tm-1") -> TaskManagerInfo:
    return TaskManagerInfo(ResourceID(name), f"inproc://taskexecutor-{name}", 6121, 4, 1,
                           T0 + 5, hardware={"cpuCores": 8, "physicalMemory": 1 << 34,
                                             "freeMemory": 1 << 30})


@PREFIXES
def test_taskmanagers(rest, prefix):
    rest.on("request_task_manager_infos", lambda: (_tm("tm-1"), _tm("tm-2")))
    body = rest.client.get(f"{prefix}/taskmanagers").json()
    assert [tm["id"] for tm in body["taskmanagers"]] == ["tm-1", "tm-2"]
    tm = body["taskmanagers"][0]
    assert set(tm) == {"id", "path", "dataPort", "jmxPort", "timeSinceLastHeartbeat",
                       "slotsNumber", "freeSlots", "totalResource", "freeResource", "hardware",
                       "memoryConfiguration"}
    assert tm["path"] == "inproc://taskexecutor-tm-1"
    assert (tm["dataPort"], tm["jmxPort"], tm["slotsNumber"], tm["freeSlots"]) == (6121, -1, 4, 1)
    assert tm["timeSinceLastHeartbeat"] == T0 + 5
    assert tm["hardware"] == {"cpuCores": 8, "physicalMemory": 1 << 34, "freeMemory": 1 << 30,
                              "managedMemory": 0}
    assert tm["totalResource"] == {"cpuCores": 0.0, "taskHeapMemory": 0, "taskOffHeapMemory": 0,
                                   "managedMemory": 0, "networkMemory": 0,
                                   "extendedResources": {}}
    assert set(tm["memoryConfiguration"]) >= {"taskHeap", "managedMemory", "totalProcessMemory"}
    assert set(tm["memoryConfiguration"].values()) == {0}
    assert body["pendingTaskManagers"] == [] and "heldBack" not in body


def test_taskmanagers_lists_those_an_active_resource_manager_starts_or_stops(rest):
    pending = (PendingTaskManagerInfo(ResourceID("application-1-taskmanager-2"), "STARTING",
                                      T0 + 7, 2, 2, 3 << 30, 1 << 29),
               PendingTaskManagerInfo(ResourceID("application-1-taskmanager-1"), "STOPPING",
                                      T0 + 3, 1, 1))
    held_back = "1 TaskManager(s) not started: slotmanager.number-of-slots.max (4) reached"
    rest.on("request_task_manager_infos", lambda: (_tm("tm-1"),))
    rest.on("request_cluster_overview", lambda: ClusterOverview(
        ResourceOverview(1, 4, 1, 1, pending_task_managers=pending, held_back=held_back),
        1, 0, 0, 0))
    body = rest.client.get("/taskmanagers").json()
    assert [tm["id"] for tm in body["taskmanagers"]] == ["tm-1"]
    assert body["pendingTaskManagers"] == [
        {"id": "application-1-taskmanager-2", "state": "STARTING", "since": T0 + 7,
         "slotsNumber": 2, "cpuCores": 2, "taskHeapMemory": 3072, "managedMemory": 512},
        {"id": "application-1-taskmanager-1", "state": "STOPPING", "since": T0 + 3,
         "slotsNumber": 1, "cpuCores": 1, "taskHeapMemory": 0, "managedMemory": 0}]
    assert body["heldBack"] == held_back


@PREFIXES
def test_one_taskmanager_and_unknown_id(rest, prefix):
    rest.on("request_task_manager_infos", lambda: (_tm("tm-1"),))
    body = rest.client.get(f"{prefix}/taskmanagers/tm-1").json()
    assert body["id"] == "tm-1"
    assert body["allocatedSlots"] == []
    assert "heapUsed" in body["metrics"]
    r = rest.client.get(f"{prefix}/taskmanagers/tm-9")
    assert r.status_code == 404
    assert "tm-9" in r.json()["errors"][0]


@PREFIXES
def test_delete_cluster_shuts_the_dispatcher_down(rest, prefix):
    r = rest.client.delete(f"{prefix}/cluster",
                           headers={"Authorization": f"Bearer {rest.secret}"})
    assert r.status_code == 202
    assert r.json() == {}
    assert len(rest.calls("shutdown_cluster")) == 1


# ---- job lists -----------------------------------------------------------------------------------


@PREFIXES
def test_jobs_ids_with_status(rest, prefix):
    other = JobID.generate()
    rest.on("list_jobs", lambda: (_details(), _details(other, JobStatus.FINISHED)))
    assert rest.client.get(f"{prefix}/jobs").json() == {"jobs": [
        {"id": str(JOB), "status": "RUNNING"}, {"id": str(other), "status": "FINISHED"},
    ]}


@PREFIXES
def test_jobs_overview(rest, prefix):
    rest.on("list_jobs", lambda: (_details(),))
    (row,) = rest.client.get(f"{prefix}/jobs/overview").json()["jobs"]
    assert row == {
        "jid": str(JOB), "name": "wordcount", "start-time": T0, "end-time": -1,
        "duration": 500, "state": "RUNNING", "last-modification": T0 + 300,
        "tasks": {"total": 4, "created": 0, "scheduled": 0, "deploying": 0, "running": 1,
                  "finished": 2, "canceling": 0, "canceled": 0, "failed": 1,
                  "reconciling": 0, "initializing": 0},
        "pending-operators": 0,
    }


# ---- one job -------------------------------------------------------------------------------------


@PREFIXES
def test_job_details(rest, prefix):
    rest.on("request_job", lambda job_id: _graph())
    body = rest.client.get(f"{prefix}/jobs/{JOB}").json()
    assert set(body) == {"jid", "name", "isStoppable", "state", "job-type", "start-time",
                         "end-time", "duration", "maxParallelism", "now", "timestamps",
                         "vertices", "status-counts", "plan", "pending-operators",
                         "pending-slot-requests", "numRestarts", "recoveries",
                         "next-restart-time"}  # the last four are flintlock's additions
    assert body["recoveries"] == 0
    assert body["jid"] == str(JOB)
    assert (body["state"], body["job-type"], body["isStoppable"]) == ("RUNNING", "BATCH", False)
    assert (body["start-time"], body["end-time"]) == (T0 - 100, -1)
    assert body["duration"] == NOW_MS - (T0 - 100)
    assert body["now"] == NOW_MS
    assert set(body["timestamps"]) == {s.name for s in JobStatus}
    assert body["timestamps"]["RUNNING"] == T0 and body["timestamps"]["FINISHED"] == 0
    assert body["status-counts"]["FINISHED"] == 2 and body["status-counts"]["FAILED"] == 1
    assert set(body["status-counts"]) == {s.name for s in ExecutionState}
    assert body["plan"]["nodes"][0]["id"] == str(SRC)

    src, mp = body["vertices"]
    assert set(src) == {"id", "slotSharingGroupId", "name", "maxParallelism", "parallelism",
                        "status", "start-time", "end-time", "duration", "tasks", "metrics"}
    assert (src["id"], src["name"], src["parallelism"], src["maxParallelism"]) == (
        str(SRC), "Source: numbers", 2, 128)
    assert src["status"] == "FINISHED"
    assert (src["start-time"], src["end-time"], src["duration"]) == (T0 + 20, T0 + 130, 110)
    assert src["tasks"]["FINISHED"] == 2
    assert len(src["slotSharingGroupId"]) == 32
    assert src["slotSharingGroupId"] == mp["slotSharingGroupId"]
    assert src["metrics"]["write-bytes"] == 1000 and src["metrics"]["write-records"] == 100
    assert src["metrics"]["write-bytes-complete"] is True
    assert set(src["metrics"]) == {
        "read-bytes", "read-bytes-complete", "write-bytes", "write-bytes-complete",
        "read-records", "read-records-complete", "write-records", "write-records-complete",
        "accumulated-backpressured-time", "accumulated-idle-time", "accumulated-busy-time"}
    assert mp["status"] == "FAILED"
    assert (mp["start-time"], mp["end-time"], mp["duration"]) == (T0 + 200, -1, NOW_MS - T0 - 200)
    assert mp["metrics"]["read-bytes"] == 100 and mp["metrics"]["read-records-complete"] is False


def test_job_details_asks_the_dispatcher_for_that_job(rest):
    rest.on("request_job", lambda job_id: _graph())
    rest.client.get(f"/v1/jobs/{JOB}")
    assert rest.calls("request_job")[0].args == (JOB,)


@PREFIXES
def test_job_status_and_plan(rest, prefix):
    rest.on("request_job_status", lambda job_id: JobStatus.RESTARTING)
    rest.on("request_job", lambda job_id: _graph())
    assert rest.client.get(f"{prefix}/jobs/{JOB}/status").json() == {"status": "RESTARTING"}
    plan = rest.client.get(f"{prefix}/jobs/{JOB}/plan").json()
    assert set(plan) == {"plan"}
    assert plan["plan"]["jid"] == str(JOB)


def test_plan_is_derived_from_vertices_when_the_job_has_none(rest):
    g = _graph()
    rest.on("request_job", lambda job_id: ArchivedExecutionGraph(
        g.job_id, g.name, g.job_type, g.state, g.state_timestamps, g.vertices))
    plan = rest.client.get(f"/jobs/{JOB}/plan").json()["plan"]
    assert [n["id"] for n in plan["nodes"]] == [str(SRC), str(MAP)]
    assert plan["type"] == "BATCH"


@PREFIXES
def test_job_exceptions_with_history(rest, prefix):
    rest.on("request_job", lambda job_id: _graph())
    body = rest.client.get(f"{prefix}/jobs/{JOB}/exceptions").json()
    assert body["root-exception"].endswith("ValueError: boom")
    assert body["timestamp"] == T0 + 300
    assert body["truncated"] is False
    (failed,) = body["all-exceptions"]
    assert failed["task"] == "Map (2/2)" and failed["location"] == "tm-1"
    history = body["exceptionHistory"]
    assert history["truncated"] is False
    newest, oldest = history["entries"]
    assert set(newest) == {"exceptionName", "stacktrace", "timestamp", "taskName", "endpoint",
                           "taskManagerId", "failureLabels", "concurrentExceptions",
                           "vertexId", "subtaskIndex", "attemptNumber", "logUrl"}
    assert (newest["vertexId"], newest["subtaskIndex"], newest["attemptNumber"]) == (str(MAP), 1, 0)
    assert newest["exceptionName"] == "ValueError"
    assert newest["timestamp"] == T0 + 300
    assert newest["taskName"] == "Map (2/2)#0"
    assert newest["endpoint"] == "tm-1:1234"
    assert newest["taskManagerId"] == "tm-1"  # the attempt's TaskManager
    assert newest["failureLabels"] == {} and newest["concurrentExceptions"] == []
    assert oldest["stacktrace"] == "KeyError: k"  # no traceback: the short form


def test_job_exceptions_max_exceptions(rest):
    rest.on("request_job", lambda job_id: _graph())
    history = rest.client.get(f"/jobs/{JOB}/exceptions?maxExceptions=1").json()["exceptionHistory"]
    assert len(history["entries"]) == 1 and history["truncated"] is True
    r = rest.client.get(f"/jobs/{JOB}/exceptions?maxExceptions=many")
    assert r.status_code == 400
    assert "maxExceptions" in r.json()["errors"][0]


@PREFIXES
def test_execution_result_in_progress(rest, prefix):
    assert rest.client.get(f"{prefix}/jobs/{JOB}/execution-result").json() == {
        "status": {"id": "IN_PROGRESS"}}


@PREFIXES
def test_execution_result_completed(rest, prefix):
    result = JobResult(JOB, "wordcount", "FAILED", 1234, {"collect-x": b"\x00\x01arrow"},
                       ExceptionHistoryEntry(BOOM, T0 + 300))
    rest.on("request_job_result", lambda job_id: result)
    body = rest.client.get(f"{prefix}/jobs/{JOB}/execution-result").json()
    assert body["status"] == {"id": "COMPLETED"}
    res = body["job-execution-result"]
    assert res["id"] == str(JOB)
    assert res["application-status"] == "FAILED"
    assert res["net-runtime"] == 1234
    assert base64.b64decode(res["accumulator-results"]["collect-x"]) == b"\x00\x01arrow"
    cause = res["failure-cause"]
    assert {k: cause[k] for k in ("class", "stack-trace", "serialized-throwable")} == {
        "class": "ValueError", "stack-trace": BOOM.traceback, "serialized-throwable": ""}
    assert cause["message"] == "boom"  # flintlock's additions for the CLI


def test_execution_result_waits_for_the_result_with_wait_ms(rest):
    """A blocking query (flintlock's ``wait-ms``): the Dispatcher gets the wait in seconds;
    without it the call is Flink's, answered at once."""
    rest.on("request_job_result", lambda job_id, timeout_s=0.0: None)
    assert rest.client.get(f"/jobs/{JOB}/execution-result?wait-ms=250").json() == {
        "status": {"id": "IN_PROGRESS"}}
    rest.client.get(f"/jobs/{JOB}/execution-result")
    calls = rest.calls("request_job_result")
    assert [c.args[1:] for c in calls] == [(0.25,), ()]
    for bad in ("-1", "30001", "soon"):
        r = rest.client.get(f"/jobs/{JOB}/execution-result?wait-ms={bad}")
        assert r.status_code == 400 and "wait-ms" in r.json()["errors"][0], r.json()
    assert len(rest.calls("request_job_result")) == 2


def test_execution_result_success_has_no_failure_cause(rest):
    rest.on("request_job_result", lambda job_id: JobResult(JOB, "wc", "SUCCEEDED", 10))
    res = rest.client.get(f"/jobs/{JOB}/execution-result").json()["job-execution-result"]
    assert "failure-cause" not in res
    assert res["accumulator-results"] == {}


@PREFIXES
def test_vertex_details_with_subtasks(rest, prefix):
    rest.on("request_job", lambda job_id: _graph())
    body = rest.client.get(f"{prefix}/jobs/{JOB}/vertices/{MAP}").json()
    assert (body["id"], body["name"], body["parallelism"], body["maxParallelism"]) == (
        str(MAP), "Map", 2, 128)
    assert body["now"] == NOW_MS
    first, second = body["subtasks"]
    assert {"subtask", "status", "attempt", "endpoint", "start-time", "end-time", "duration",
            "metrics", "taskmanager-id", "status-duration"} <= set(first)
    assert (first["subtask"], first["status"], first["attempt"]) == (0, "RUNNING", 1)
    assert (first["endpoint"], first["taskmanager-id"]) == ("tm-2", "tm-2")
    assert (first["start-time"], first["end-time"]) == (T0 + 200, -1)
    assert first["duration"] == NOW_MS - T0 - 200
    assert first["metrics"]["read-records"] == 10
    assert first["status-duration"]["DEPLOYING"] == 10
    assert first["status-duration"]["RUNNING"] == NOW_MS - T0 - 210
    assert (second["status"], second["end-time"], second["duration"]) == ("FAILED", T0 + 300, 100)


def test_vertex_errors(rest):
    rest.on("request_job", lambda job_id: _graph())
    r = rest.client.get(f"/jobs/{JOB}/vertices/{'c' * 32}")
    assert r.status_code == 404 and "c" * 32 in r.json()["errors"][0]
    r = rest.client.get(f"/jobs/{JOB}/vertices/not-a-vertex")
    assert r.status_code == 400 and "vertexid" in r.json()["errors"][0]


# ---- cancellation --------------------------------------------------------------------------------


@PREFIXES
def test_patch_cancel(rest, prefix):
    r = rest.client.patch(f"{prefix}/jobs/{JOB}?mode=cancel")
    assert r.status_code == 202
    assert r.json() == {}
    assert rest.calls("cancel_job")[0].args == (JOB,)


def test_patch_without_mode_cancels(rest):
    assert rest.client.patch(f"/v1/jobs/{JOB}").status_code == 202
    assert len(rest.calls("cancel_job")) == 1


def test_patch_stop_is_not_supported(rest):
    r = rest.client.patch(f"/v1/jobs/{JOB}?mode=stop")
    assert r.status_code == 400
    assert "stop" in r.json()["errors"][0]
    r = rest.client.patch(f"/v1/jobs/{JOB}?mode=explode")
    assert r.status_code == 400
    assert rest.calls("cancel_job") == []


@PREFIXES
def test_yarn_cancel(rest, prefix):
    r = rest.client.get(f"{prefix}/jobs/{JOB}/yarn-cancel")
    assert r.status_code == 202
    assert rest.calls("cancel_job")[0].args == (JOB,)


def test_cancel_unknown_job_is_404(rest):
    rest.on("cancel_job", _unknown)
    r = rest.client.patch(f"/v1/jobs/{JOB}?mode=cancel")
    assert r.status_code == 404
    assert r.json() == {"errors": [f"Could not find Flink job ({JOB})"]}


# ---- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [
    f"/jobs/{JOB}", f"/jobs/{JOB}/status", f"/jobs/{JOB}/plan", f"/jobs/{JOB}/exceptions",
    f"/jobs/{JOB}/execution-result", f"/jobs/{JOB}/vertices/{SRC}",
])
@PREFIXES
def test_unknown_job_is_404(rest, prefix, path):
    for method in ("request_job", "request_job_status", "request_job_result"):
        rest.on(method, _unknown)
    r = rest.client.get(prefix + path)
    assert r.status_code == 404
    assert r.json() == {"errors": [f"Could not find Flink job ({JOB})"]}


@pytest.mark.parametrize("path", ["/jobs/xyz", "/jobs/xyz/status", "/jobs/ABCD/plan",
                                  f"/jobs/{'g' * 32}/exceptions", "/jobs/1/execution-result"])
def test_malformed_job_id_is_400_naming_the_parameter(rest, path):
    r = rest.client.get("/v1" + path)
    assert r.status_code == 400
    (message,) = r.json()["errors"]
    assert "jobid" in message
    assert rest.dispatcher.calls == []


def test_upper_case_job_id_is_accepted(rest):
    rest.on("request_job_status", lambda job_id: JobStatus.RUNNING)
    assert rest.client.get(f"/jobs/{str(JOB).upper()}/status").status_code == 200
    assert rest.calls("request_job_status")[0].args == (JOB,)


@pytest.mark.parametrize("path", ["/nothing", "/v1/nothing", "/v2/jobs", "/jobs/a/b/c/d"])
def test_unknown_path_is_404(rest, path):
    r = rest.client.get(path)
    assert r.status_code == 404
    assert r.json() == {"errors": ["Not Found"]}


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/v1/overview"), ("PUT", "/jobs/overview"), ("DELETE", f"/v1/jobs/{JOB}"),
    ("GET", "/cluster"),
])
def test_wrong_method_is_405(rest, method, path):
    r = rest.client.request(method, path)
    assert r.status_code == 405
    assert r.json() == {"errors": ["Method Not Allowed"]}


def test_remote_dispatcher_errors_keep_their_status(rest):
    def remote_not_found(job_id):
        raise RemoteError("flintlock.runtime.dispatcher.exceptions.FlinkJobNotFoundException",
                          f"Could not find Flink job ({job_id})")

    rest.on("request_job_status", remote_not_found)
    r = rest.client.get(f"/jobs/{JOB}/status")
    assert r.status_code == 404
    assert r.json() == {"errors": [f"Could not find Flink job ({JOB})"]}


def test_internal_error_is_500_with_errors_body(rest, caplog):
    def broken():
        raise RuntimeError("dispatcher bug")

    rest.on("list_jobs", broken)
    with caplog.at_level("ERROR", logger="flintlock.runtime.rest.errors"):
        r = rest.client.get("/v1/jobs")
    assert r.status_code == 500
    errors = r.json()["errors"]
    assert errors[0] == "Internal server error."
    assert "dispatcher bug" in errors[1]


def test_openapi_is_served(rest):
    r = rest.client.get("/openapi.json")
    assert r.status_code == 200
    spec = r.json()
    assert "/v1/jobs/{jobid}" in spec["paths"]
    assert set(spec["paths"]["/v1/jobs"]) == {"get", "post"}
    assert "multipart/form-data" in spec["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]


def test_the_high_availability_view(rest, make_rest):
    assert rest.client.get("/v1/jobmanager/high-availability").json() == {
        "type": "NONE", "cluster-id": None, "storage-dir": None, "leader": None,
        "jobmanagers": []}
    doc = {"type": "FILE", "cluster-id": "/default", "storage-dir": "/ha", "leader": None,
           "jobmanagers": [{"id": "h-1-x", "role": "standby"}]}
    assert make_rest(high_availability=lambda: doc).client.get(
        "/jobmanager/high-availability").json() == doc

    def unreachable():
        raise ConnectionError("ZooKeeper 127.0.0.1:2181 does not answer")

    r = make_rest(high_availability=unreachable).client.get("/jobmanager/high-availability")
    assert r.status_code == 503
    assert r.json()["errors"] == ["The high-availability store cannot be read: ConnectionError: "
                                  "ZooKeeper 127.0.0.1:2181 does not answer"]
