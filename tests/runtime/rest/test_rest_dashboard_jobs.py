"""What Flink 2.1's web dashboard asks about a job and its vertices (issue 17): accumulators,
flame graphs, JobManager operator metrics, aggregated vertex details, subtask times, the job
graph's metrics and the plan its nodes are drawn from, in Flink's shapes on both path forms."""

from __future__ import annotations

import dataclasses
import math

import pytest

from flintlock.graph.plan import job_graph_plan
from flintlock.runtime.dispatcher.exceptions import FlinkJobNotFoundException
from flintlock.runtime.executiongraph.archived import (
    ArchivedExecution,
    ArchivedExecutionGraph,
    ArchivedJobVertex,
)
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID, JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import JobVertex
from flintlock.runtime.jobgraph.json_plan import plan_description
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus, JobType
from flintlock.runtime.metrics.live_task_metrics import LiveTaskMetrics
from flintlock.runtime.metrics.task_metrics import accumulated_times
from flintlock.runtime.rest.messages_vertices import aggregated_task_details
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics, SerializedError

PREFIXES = pytest.mark.parametrize("prefix", ["/v1", ""])

JOB = JobID("0123456789abcdef0123456789abcdef")
SRC = JobVertexID("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
MAP = JobVertexID("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
WIN = JobVertexID("cccccccccccccccccccccccccccccccc")
UNKNOWN = "d" * 32
T0 = 1_700_000_000_000
NOW = 1_700_000_100_000  # the harness's clock (conftest.NOW_MS)

STATS = {"min", "max", "avg", "sum", "median", "p25", "p75", "p95"}
AGGREGATED_METRICS = {"read-bytes", "write-bytes", "read-records", "write-records",
                      "accumulated-backpressured-time", "accumulated-busy-time",
                      "accumulated-idle-time"}
AGGREGATED_STATES = {"CREATED", "SCHEDULED", "INITIALIZING", "DEPLOYING", "RUNNING"}
GRAPH_METRICS = "backPressuredTimeMsPerSecond,busyTimeMsPerSecond,numRecordsInPerSecond"


def _attempt(vertex: JobVertexID, index: int, attempt: int = 0) -> ExecutionAttemptID:
    return ExecutionAttemptID(ExecutionVertexID(vertex, index), attempt, "n0nce")


def _finished(index: int, records_out: int) -> ArchivedExecution:
    """A finished BATCH source subtask: 100 ms RUNNING."""
    return ArchivedExecution(
        _attempt(SRC, index), ExecutionState.FINISHED, "tm-1",
        {"CREATED": T0, "SCHEDULED": T0 + 10, "DEPLOYING": T0 + 20, "RUNNING": T0 + 30,
         "FINISHED": T0 + 130},
        metrics=IOMetrics(records_in=0, records_out=records_out, bytes_in=0,
                          bytes_out=10 * records_out))


#: the back-pressured and idle ms the two STREAMING subtasks' last live reports accumulated
WAITED = ((30_000.0, 10_000.0), (60_000.0, 5_000.0))


def _live(index: int, records_in_per_second: float) -> ArchivedExecution:
    """A running STREAMING subtask with a live report (RUNNING for 99,950 ms)."""
    attempt = _attempt(WIN, index)
    back_pressured, idle = WAITED[index]
    live = LiveTaskMetrics(attempt, NOW - 500, records_in=50, records_out=25, bytes_in=1000,
                           bytes_out=250, busy_ms_per_second=600.0,
                           back_pressured_ms_per_second=300.0, idle_ms_per_second=100.0,
                           records_in_per_second=records_in_per_second,
                           records_out_per_second=records_in_per_second / 2,
                           accumulated_back_pressured_ms=back_pressured, accumulated_idle_ms=idle)
    return ArchivedExecution(attempt, ExecutionState.RUNNING, f"tm-{index + 1}",
                             {"CREATED": T0, "DEPLOYING": T0 + 40, "RUNNING": T0 + 50},
                             live=live, accumulated_back_pressured_ms=back_pressured,
                             accumulated_idle_ms=idle)


def _graph() -> ArchivedExecutionGraph:
    current = (
        ArchivedExecution(_attempt(MAP, 0, 1), ExecutionState.RUNNING, "tm-2",
                          {"CREATED": T0, "DEPLOYING": T0 + 200, "RUNNING": T0 + 210}),
        ArchivedExecution(_attempt(MAP, 1), ExecutionState.CREATED, None, {"CREATED": T0}),
    )
    prior = (
        ArchivedExecution(_attempt(MAP, 0, 0), ExecutionState.FAILED, "tm-1",
                          {"CREATED": T0, "DEPLOYING": T0 + 100, "RUNNING": T0 + 110,
                           "FAILED": T0 + 150}, failure=SerializedError("ValueError", "boom")),
    )
    return ArchivedExecutionGraph(
        job_id=JOB, name="dashboard", job_type=JobType.STREAMING, state=JobStatus.RUNNING,
        state_timestamps={"INITIALIZING": T0 - 100, "RUNNING": T0},
        vertices=(
            ArchivedJobVertex(SRC, "Source: numbers -> Filter", 2, 128, "default",
                              (_finished(0, 50), _finished(1, 60))),
            ArchivedJobVertex(MAP, "Map", 2, 128, "default", current, prior),
            ArchivedJobVertex(WIN, 'Window<"k"> & Sink', 2, 128, "default",
                              (_live(0, 100.0), _live(1, 300.0))),
        ),
    )


def _request_job(job_id: JobID) -> ArchivedExecutionGraph:
    if job_id != JOB:
        raise FlinkJobNotFoundException(job_id)
    return _graph()


@pytest.fixture
def job(rest):
    rest.on("request_job", _request_job)
    return rest


def _get(harness, path: str, **params):
    r = harness.client.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()


# ---- accumulators ----------------------------------------------------------------------------------


@PREFIXES
def test_job_accumulators(job, prefix):
    assert _get(job, f"{prefix}/jobs/{JOB}/accumulators") == {
        "job-accumulators": [], "user-task-accumulators": [],
        "serialized-user-task-accumulators": {}}
    assert _get(job, f"{prefix}/jobs/{JOB}/accumulators", includeSerializedValue="true")[
        "serialized-user-task-accumulators"] == {}


@PREFIXES
def test_vertex_accumulators(job, prefix):
    assert _get(job, f"{prefix}/jobs/{JOB}/vertices/{MAP}/accumulators") == {
        "id": str(MAP), "user-accumulators": []}


@PREFIXES
def test_subtask_accumulators_list_the_current_attempts(job, prefix):
    body = _get(job, f"{prefix}/jobs/{JOB}/vertices/{MAP}/subtasks/accumulators")
    assert body == {"id": str(MAP), "parallelism": 2, "subtasks": [
        {"subtask": 0, "attempt": 1, "endpoint": "tm-2", "host": "tm-2",
         "user-accumulators": []},
        {"subtask": 1, "attempt": 0, "endpoint": "(unassigned)", "host": "(unassigned)",
         "user-accumulators": []},
    ]}


@PREFIXES
def test_attempt_accumulators_of_current_and_prior_attempts(job, prefix):
    base = f"{prefix}/jobs/{JOB}/vertices/{MAP}/subtasks/0/attempts"
    assert _get(job, f"{base}/1/accumulators") == {
        "subtask": 0, "attempt": 1, "id": str(_attempt(MAP, 0, 1)), "user-accumulators": []}
    assert _get(job, f"{base}/0/accumulators")["id"] == str(_attempt(MAP, 0, 0))


@pytest.mark.parametrize(("path", "status"), [
    (f"/jobs/{UNKNOWN}/accumulators", 404),
    ("/jobs/nope/accumulators", 400),
    (f"/jobs/{JOB}/vertices/{UNKNOWN}/accumulators", 404),
    (f"/jobs/{JOB}/vertices/not-hex/subtasks/accumulators", 400),
    (f"/jobs/{JOB}/vertices/{MAP}/subtasks/2/attempts/0/accumulators", 404),
    (f"/jobs/{JOB}/vertices/{MAP}/subtasks/0/attempts/7/accumulators", 404),
])
def test_accumulator_lookups_fail_as_flink_does(job, path, status):
    r = job.client.get(path)
    assert r.status_code == status, r.text
    assert r.json()["errors"]


# ---- flame graphs and JobManager operator metrics ---------------------------------------------------


@PREFIXES
@pytest.mark.parametrize("params", [{}, {"type": "full"}, {"type": "on_cpu"},
                                    {"type": "OFF_CPU"}, {"type": "ON_CPU", "subtaskindex": "1"}])
def test_flame_graph_is_disabled_as_in_flink(job, prefix, params):
    # VertexFlameGraph.disabled(): endTimestamp -2 and no data (Flink leaves out nulls)
    assert _get(job, f"{prefix}/jobs/{JOB}/vertices/{MAP}/flamegraph", **params) == {
        "endTimestamp": -2}


@pytest.mark.parametrize(("path", "params"), [
    (f"/jobs/{JOB}/vertices/{MAP}/flamegraph", {"type": "cpu"}),
    (f"/jobs/{JOB}/vertices/{MAP}/flamegraph", {"subtaskindex": "-1"}),
    (f"/jobs/nope/vertices/{MAP}/flamegraph", {}),
    (f"/jobs/{JOB}/vertices/nope/jm-operator-metrics", {}),
    (f"/jobs/{JOB}/vertices/{MAP}/jm-operator-metrics", {"get": "bad name!"}),
])
def test_flame_graph_and_operator_metrics_reject_bad_parameters(job, path, params):
    r = job.client.get(path, params=params)
    assert r.status_code == 400, r.text
    assert r.json()["errors"]


@PREFIXES
@pytest.mark.parametrize("params", [{}, {"get": "numRecordsIn,coordinator.x"}])
def test_job_manager_operator_metrics_are_an_empty_list(job, prefix, params):
    assert _get(job, f"{prefix}/jobs/{JOB}/vertices/{SRC}/jm-operator-metrics", **params) == []


# ---- vertex details, subtask times, vertex TaskManagers ---------------------------------------------


@PREFIXES
def test_vertex_details_subtasks_carry_flinks_fields(job, prefix):
    body = _get(job, f"{prefix}/jobs/{JOB}/vertices/{MAP}")
    running, created = body["subtasks"]
    assert {"subtask", "status", "attempt", "endpoint", "host", "start-time", "start_time",
            "end-time", "duration", "metrics", "taskmanager-id", "status-duration",
            "other-concurrent-attempts"} <= set(running)
    assert (running["endpoint"], running["host"], running["taskmanager-id"]) == (
        "tm-2", "tm-2", "tm-2")
    assert running["start_time"] == running["start-time"] == T0 + 200
    assert running["other-concurrent-attempts"] == []
    assert set(running["status-duration"]) == AGGREGATED_STATES
    assert (created["host"], created["start_time"]) == ("(unassigned)", -1)


@PREFIXES
def test_vertex_details_are_aggregated_as_flink_aggregates_them(job, prefix):
    aggregated = _get(job, f"{prefix}/jobs/{JOB}/vertices/{SRC}")["aggregated"]
    assert set(aggregated) == {"metrics", "status-duration"}
    assert set(aggregated["metrics"]) == AGGREGATED_METRICS
    assert set(aggregated["status-duration"]) == AGGREGATED_STATES
    assert all(set(s) == STATS for s in (*aggregated["metrics"].values(),
                                         *aggregated["status-duration"].values()))
    assert aggregated["metrics"]["write-records"] == {
        "min": 50, "max": 60, "avg": 55, "sum": 110, "median": 55, "p25": 50, "p75": 60,
        "p95": 60}
    assert aggregated["metrics"]["accumulated-busy-time"]["sum"] == 200  # 100 ms RUNNING each
    assert aggregated["metrics"]["read-records"] == dict.fromkeys(STATS, 0)
    assert aggregated["status-duration"]["SCHEDULED"]["max"] == 10
    assert aggregated["status-duration"]["RUNNING"]["avg"] == 100
    assert aggregated["status-duration"]["INITIALIZING"] == dict.fromkeys(STATS, 0)


@PREFIXES
def test_accumulated_times_split_the_time_running_as_the_live_reports_did(job, prefix):
    """Flink's ``accumulated-backpressured-time`` / ``-idle-time`` of a STREAMING subtask are
    what it accumulated; busy is the rest of its time RUNNING; a vertex sums its subtasks."""
    running = NOW - (T0 + 50)
    first, second = _get(job, f"{prefix}/jobs/{JOB}/vertices/{WIN}")["subtasks"]
    assert (first["metrics"]["accumulated-backpressured-time"],
            first["metrics"]["accumulated-idle-time"],
            first["metrics"]["accumulated-busy-time"]) == (30_000, 10_000, running - 40_000)
    assert second["metrics"]["accumulated-backpressured-time"] == 60_000
    (vertex,) = [v for v in _get(job, f"{prefix}/jobs/{JOB}")["vertices"] if v["id"] == str(WIN)]
    assert (vertex["metrics"]["accumulated-backpressured-time"],
            vertex["metrics"]["accumulated-idle-time"],
            vertex["metrics"]["accumulated-busy-time"]) == (90_000, 15_000, 2 * running - 105_000)
    # a finished BATCH vertex is busy for its subtasks' time RUNNING (100 ms each)
    (source,) = [v for v in _get(job, f"{prefix}/jobs/{JOB}")["vertices"] if v["id"] == str(SRC)]
    assert (source["metrics"]["accumulated-busy-time"],
            source["metrics"]["accumulated-idle-time"]) == (200, 0)
    values = {m["id"]: float(m["value"]) for m in _get(
        job, f"{prefix}/jobs/{JOB}/vertices/{WIN}/metrics",
        get="1.accumulateBackPressuredTimeMs,1.accumulateIdleTimeMs,1.accumulateBusyTimeMs")}
    assert values == {"1.accumulateBackPressuredTimeMs": 60_000.0,
                      "1.accumulateIdleTimeMs": 5_000.0,
                      "1.accumulateBusyTimeMs": running - 65_000.0}


def test_accumulated_times_are_kept_after_the_attempt_ended_and_never_exceed_its_run():
    cancelled = ArchivedExecution(
        _attempt(WIN, 0), ExecutionState.CANCELED, "tm-1",
        {"CREATED": T0, "RUNNING": T0 + 50, "CANCELING": T0 + 1050, "CANCELED": T0 + 1100},
        accumulated_back_pressured_ms=700.0, accumulated_idle_ms=200.0)
    assert accumulated_times(cancelled, NOW) == (100.0, 700.0, 200.0)  # 1,000 ms RUNNING
    # a report slightly ahead of the JobMaster's clock: back pressure first, then idleness
    ahead = dataclasses.replace(cancelled, accumulated_back_pressured_ms=900.0,
                                accumulated_idle_ms=400.0)
    assert accumulated_times(ahead, NOW) == (0.0, 900.0, 100.0)


def test_aggregated_statistics_follow_flinks_long_arithmetic():
    durations = [{"RUNNING": v} for v in (4, 1, 3, 2)]
    ios = [{"read-bytes": v, "accumulated-busy-time": b}
           for v, b in ((-1, 1.9), (-2, math.nan), (0, 2.5), (0, 0.0))]
    got = aggregated_task_details(ios, durations)
    # commons-math Percentile: position p/100 * (n + 1), interpolated, then cast to long
    assert got["status-duration"]["RUNNING"] == {
        "min": 1, "max": 4, "avg": 2, "sum": 10, "median": 2, "p25": 1, "p75": 3, "p95": 4}
    # Java's long division truncates toward zero: -3 / 4 == 0
    assert got["metrics"]["read-bytes"]["avg"] == 0 and got["metrics"]["read-bytes"]["sum"] == -3
    # an unknown (NaN) busy time counts as -1, fractions are truncated
    assert got["metrics"]["accumulated-busy-time"]["min"] == -1
    assert got["metrics"]["accumulated-busy-time"]["sum"] == 2
    assert aggregated_task_details([], [])["metrics"]["read-bytes"] == dict.fromkeys(STATS, 0)
    single = aggregated_task_details([{"write-records": 7}], [{}])["metrics"]["write-records"]
    assert single == {"min": 7, "max": 7, "avg": 7, "sum": 7, "median": 7, "p25": 7, "p75": 7,
                      "p95": 7}


@PREFIXES
def test_subtask_times_send_host_and_endpoint(job, prefix):
    body = _get(job, f"{prefix}/jobs/{JOB}/vertices/{MAP}/subtasktimes")
    first, second = body["subtasks"]
    assert (first["subtask"], first["endpoint"], first["host"]) == (0, "tm-2", "tm-2")
    assert (second["endpoint"], second["host"]) == ("(unassigned)", "(unassigned)")
    assert first["timestamps"]["RUNNING"] == T0 + 210


@PREFIXES
def test_vertex_task_managers_are_aggregated_per_task_manager(job, prefix):
    body = _get(job, f"{prefix}/jobs/{JOB}/vertices/{WIN}/taskmanagers")
    assert [(t["endpoint"], t["host"]) for t in body["taskmanagers"]] == [
        ("tm-1", "tm-1"), ("tm-2", "tm-2")]
    aggregated = body["taskmanagers"][0]["aggregated"]
    assert set(aggregated["metrics"]) == AGGREGATED_METRICS
    assert set(aggregated["metrics"]["read-records"]) == STATS


# ---- the job graph's metrics -------------------------------------------------------------------------


@PREFIXES
@pytest.mark.parametrize("vertex", [SRC, MAP, WIN])
def test_job_graph_metrics_are_there_for_every_vertex(job, prefix, vertex):
    body = _get(job, f"{prefix}/jobs/{JOB}/vertices/{vertex}/subtasks/metrics",
                get=GRAPH_METRICS)
    assert [m["id"] for m in body] == GRAPH_METRICS.split(",")
    assert all(set(m) == {"id", "min", "max", "avg", "sum", "skew"} for m in body)


def test_job_graph_metrics_of_a_streaming_vertex_are_its_live_ones(job):
    body = _get(job, f"/jobs/{JOB}/vertices/{WIN}/subtasks/metrics",
                get=GRAPH_METRICS + ",idleTimeMsPerSecond,numRecordsOutPerSecond,"
                                    "numBytesInPerSecond,numBytesOutPerSecond")
    by_id = {m["id"]: m for m in body}
    assert by_id["backPressuredTimeMsPerSecond"]["max"] == 300.0
    assert by_id["busyTimeMsPerSecond"]["max"] == 600.0
    assert by_id["idleTimeMsPerSecond"]["avg"] == 100.0
    # 100 and 300 records/s: mean 200, mean absolute deviation 100 -> 50 % skew
    assert (by_id["numRecordsInPerSecond"]["sum"], by_id["numRecordsInPerSecond"]["skew"]) == (
        400.0, 50.0)
    assert by_id["numRecordsOutPerSecond"]["max"] == 150.0
    # bytes/s approximated as records/s times the average record size so far (1000 B / 50)
    assert by_id["numBytesInPerSecond"]["min"] == 2000.0
    assert by_id["numBytesOutPerSecond"]["max"] == 150.0 * 250 / 25


def test_job_graph_metrics_of_finished_batch_subtasks_average_their_run(job):
    body = _get(job, f"/jobs/{JOB}/vertices/{SRC}/subtasks/metrics",
                get="numRecordsOutPerSecond,numBytesOutPerSecond,numRecordsInPerSecond,"
                    "busyTimeMsPerSecond,backPressuredTimeMsPerSecond,idleTimeMsPerSecond")
    by_id = {m["id"]: m for m in body}
    # 50 and 60 records in 100 ms RUNNING
    assert (by_id["numRecordsOutPerSecond"]["min"], by_id["numRecordsOutPerSecond"]["max"]) == (
        500.0, 600.0)
    assert by_id["numBytesOutPerSecond"]["sum"] == 11000.0
    assert by_id["numRecordsInPerSecond"]["max"] == 0.0
    for idle in ("busyTimeMsPerSecond", "backPressuredTimeMsPerSecond", "idleTimeMsPerSecond"):
        assert by_id[idle]["max"] == 0.0


def test_a_running_batch_subtask_is_busy_until_its_counts_are_known(job):
    body = _get(job, f"/jobs/{JOB}/vertices/{MAP}/subtasks/0/metrics",
                get="busyTimeMsPerSecond,idleTimeMsPerSecond,numRecordsInPerSecond")
    assert body == [{"id": "busyTimeMsPerSecond", "value": "1000"},
                    {"id": "idleTimeMsPerSecond", "value": "0"},
                    {"id": "numRecordsInPerSecond", "value": "0"}]


@PREFIXES
def test_the_metric_lists_name_the_dashboards_metrics(job, prefix):
    listed = {m["id"] for m in _get(job, f"{prefix}/jobs/{JOB}/vertices/{MAP}/subtasks/metrics")}
    assert {"backPressuredTimeMsPerSecond", "busyTimeMsPerSecond", "idleTimeMsPerSecond",
            "numRecordsInPerSecond", "numRecordsOutPerSecond", "numBytesInPerSecond",
            "numBytesOutPerSecond"} <= listed
    per_subtask = {m["id"] for m in _get(job, f"{prefix}/jobs/{JOB}/vertices/{SRC}/metrics")}
    assert {"0.numRecordsInPerSecond", "1.backPressuredTimeMsPerSecond"} <= per_subtask


# ---- the plan the job graph is drawn from ------------------------------------------------------------


@PREFIXES
def test_plan_nodes_describe_their_vertex_once(job, prefix):
    # Flink 2.x plans have no operator name; the dashboard prints operator, then the vertex name
    nodes = _get(job, f"{prefix}/jobs/{JOB}/plan")["plan"]["nodes"]
    assert [(n["operator"], n["operator_strategy"], n["description"]) for n in nodes] == [
        ("", "", "Source: numbers -&gt; Filter"), ("", "", "Map"),
        ("", "", "Window&lt;&quot;k&quot;&gt; &amp; Sink")]
    details = _get(job, f"{prefix}/jobs/{JOB}")
    assert details["plan"]["nodes"] == nodes


def test_plan_descriptions_are_escaped_as_json_plan_generator_does():
    assert plan_description('a -> b <c> & "d"') == "a -&gt; b &lt;c&gt; &amp; &quot;d&quot;"
    assert plan_description("line\\one\ntwo") == "line&#92;one<br/>two"


def test_generated_job_graph_plans_leave_the_operator_empty():
    vertex = JobVertex(SRC, "Source: a -> Map", 2, 128,
                       "flintlock.testing.invokables:NoOpInvokable")
    (node,) = job_graph_plan(JOB, "j", JobType.BATCH, [vertex])["nodes"]
    assert (node["operator"], node["description"]) == ("", "Source: a -&gt; Map")


def test_a_speculative_attempt_shows_as_another_concurrent_attempt(rest):
    """Speculative execution: subtask 0 of the vertex runs attempt 0 (the original, slow) and
    attempt 1 at once; Flink lists the other one under ``other-concurrent-attempts``."""
    original = ArchivedExecution(_attempt(MAP, 0, 0), ExecutionState.RUNNING, "tm-1",
                                 {"CREATED": T0, "DEPLOYING": T0 + 10, "RUNNING": T0 + 20})
    speculative = ArchivedExecution(_attempt(MAP, 0, 1), ExecutionState.RUNNING, "tm-2",
                                    {"CREATED": T0 + 5000, "DEPLOYING": T0 + 5010,
                                     "RUNNING": T0 + 5020})
    graph = ArchivedExecutionGraph(
        job_id=JOB, name="speculative", job_type=JobType.BATCH, state=JobStatus.RUNNING,
        state_timestamps={"RUNNING": T0},
        vertices=(ArchivedJobVertex(MAP, "Map", 1, 128, "default", (original,),
                                    concurrent_attempts=(speculative,)),))
    rest.on("request_job", lambda job_id: graph)
    (subtask,) = _get(rest, f"/jobs/{JOB}/vertices/{MAP}")["subtasks"]
    assert (subtask["attempt"], subtask["host"]) == (0, "tm-1")
    (other,) = subtask["other-concurrent-attempts"]
    assert (other["attempt"], other["status"], other["host"]) == (1, "RUNNING", "tm-2")
    assert subtask["attempts"] == [0, 1]
    single = _get(rest, f"/jobs/{JOB}/vertices/{MAP}/subtasks/0")
    assert [o["attempt"] for o in single["other-concurrent-attempts"]] == [1]
    assert _get(rest, f"/jobs/{JOB}/vertices/{MAP}/subtasks/0/attempts/1")["host"] == "tm-2"
