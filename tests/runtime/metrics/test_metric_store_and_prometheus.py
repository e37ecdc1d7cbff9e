"""Task metric store, metric query helpers, Prometheus families and the endpoint (no cluster)."""

from __future__ import annotations

import asyncio
import dataclasses
import socket

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from flintlock.config import Configuration
from flintlock.runtime.deployment import TaskDeploymentDescriptor
from flintlock.runtime.dispatcher.gateway import ClusterOverview
from flintlock.runtime.executiongraph.archived import JobDetails
from flintlock.runtime.ids import (
    AllocationID,
    ExecutionAttemptID,
    ExecutionVertexID,
    JobID,
    JobVertexID,
)
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus
from flintlock.runtime.metrics.live_task_metrics import LiveTaskMetrics
from flintlock.runtime.metrics.process import process_stats
from flintlock.runtime.metrics.prometheus import (
    PrometheusReporter,
    job_manager_families,
    parse_ports,
    start_prometheus_reporter,
    task_manager_families,
)
from flintlock.runtime.metrics.task_manager_metrics import (
    TaskManagerMetricsSnapshot,
    TaskMetricStore,
)
from flintlock.runtime.metrics.task_metrics import (
    busy_time_ms,
    parse_aggregations,
    parse_subtask_ranges,
)
from flintlock.runtime.resourcemanager.gateway import ResourceOverview
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics

JOB = JobID("0123456789abcdef0123456789abcdef")
VERTEX = JobVertexID("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
E = ExecutionState


def _tdd(subtask: int, attempt: int) -> TaskDeploymentDescriptor:
    return TaskDeploymentDescriptor(
        job_id=JOB, job_name="word count", attempt_id=ExecutionAttemptID(
            ExecutionVertexID(VERTEX, subtask), attempt, f"n{attempt}"),
        allocation_id=AllocationID.generate(), vertex_name="Source: lines", number_of_subtasks=2,
        max_parallelism=128, invokable_class="x:Y")


def test_busy_time():
    assert busy_time_ms(E.RUNNING, {"RUNNING": 1000}, 1500) == 500
    assert busy_time_ms(E.FINISHED, {"RUNNING": 1000, "FINISHED": 1300}, 9999) == 300
    assert busy_time_ms(E.CANCELED, {"RUNNING": 1000, "CANCELING": 1100, "CANCELED": 1400},
                        9999) == 100
    assert busy_time_ms(E.DEPLOYING, {"DEPLOYING": 1000}, 9999) == 0


def test_query_helpers():
    assert parse_subtask_ranges("0,2-3,9", 4) == [0, 2, 3]
    assert parse_subtask_ranges(None, 3) == [0, 1, 2]
    assert parse_aggregations(None) == ("min", "max", "avg", "sum", "skew")
    assert parse_aggregations("MAX, sum") == ("max", "sum")
    with pytest.raises(ValueError, match="median"):
        parse_aggregations("median")
    with pytest.raises(ValueError):
        parse_subtask_ranges("1-x", 4)


def test_store_keeps_the_latest_attempt_per_subtask_bounded():
    store = TaskMetricStore(max_entries=2)
    store.task_deployed(_tdd(0, 0))
    store.task_state_changed(JOB, _tdd(0, 0).attempt_id, E.RUNNING, None, 1000)
    store.task_deployed(_tdd(0, 1))  # a new attempt replaces the old one
    store.task_state_changed(JOB, _tdd(0, 0).attempt_id, E.FAILED, None, 1100)  # stale: ignored
    store.task_state_changed(JOB, _tdd(0, 1).attempt_id, E.RUNNING, None, 2000)
    store.task_state_changed(JOB, _tdd(0, 1).attempt_id, E.FINISHED, IOMetrics(5, 7, 50, 70), 2500)
    (sample,) = store.samples()
    assert (sample.attempt_number, sample.state, sample.io.records_out) == (1, E.FINISHED, 7)
    assert sample.metrics(9999)["accumulateBusyTimeMs"] == 500
    assert sample.metrics(9999)["busyTimeMsPerSecond"] == 0
    store.task_deployed(_tdd(1, 0))
    other_job = JobID.generate()
    store.task_deployed(dataclasses.replace(_tdd(0, 0), job_id=other_job))
    # bounded: the subtask deployed longest ago was dropped
    assert [(s.job_id, s.subtask_index) for s in store.samples()] == [
        (str(JOB), 1), (str(other_job), 0)]


def test_a_running_subtask_shows_its_live_counts_in_the_task_managers_own_metrics():
    """The TaskExecutor's live reports (batch: Spark's progress; streaming: the task's counters)
    reach its own store, so its Prometheus endpoint and /taskmanagers/:id/metrics see counts
    growing while the subtask runs; a failed attempt keeps what it last reported."""
    store = TaskMetricStore()
    attempt = _tdd(0, 0).attempt_id
    store.task_deployed(_tdd(0, 0))
    store.live_metrics_reported(JOB, LiveTaskMetrics(attempt, 900, records_in=5))  # not running
    assert store.samples()[0].live is None
    store.task_state_changed(JOB, attempt, E.RUNNING, None, 1000)
    store.live_metrics_reported(JOB, LiveTaskMetrics(
        attempt, 3000, records_in=40_000, records_out=30_000, bytes_in=320_000,
        records_in_per_second=20_000.0, busy_ms_per_second=700.0, idle_ms_per_second=300.0,
        accumulated_idle_ms=600.0))
    stale = ExecutionAttemptID(attempt.execution_vertex_id, 7, "n7")  # not this store's attempt
    store.live_metrics_reported(JOB, LiveTaskMetrics(stale, 3000, records_in=1))
    (sample,) = store.samples()
    values = sample.metrics(3000)
    assert (values["numRecordsIn"], values["numRecordsOut"], values["numRecordsInPerSecond"],
            values["idleTimeMsPerSecond"]) == (40_000, 30_000, 20_000, 300)
    families = _parse(_render(task_manager_families([TaskManagerMetricsSnapshot(
        "tm", 3000, process_stats(), 1, 0, 1, store.samples())])))
    assert families["flink_taskmanager_job_task_numRecordsIn"][0].value == 40_000
    store.task_state_changed(JOB, attempt, E.FAILED, None, 3500)  # its TaskManager sent no io
    (failed,) = store.samples()
    assert failed.io == IOMetrics(40_000, 30_000, 320_000, 0)
    assert failed.metrics(9999)["busyTimeMsPerSecond"] == 0


def _snapshot(now: int = 10_000) -> TaskManagerMetricsSnapshot:
    store = TaskMetricStore()
    for i in (0, 1):
        store.task_deployed(_tdd(i, 3))
        store.task_state_changed(JOB, _tdd(i, 3).attempt_id, E.RUNNING, None, 1000)
        store.task_state_changed(JOB, _tdd(i, 3).attempt_id, E.FINISHED,
                                 IOMetrics(0, 10 + i, 0, 100), 2000)
    return TaskManagerMetricsSnapshot("127.0.0.1:1234-abc", now, process_stats(), 4, 3, 1,
                                      store.samples())


def _parse(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_task_manager_families_use_flink_names_and_bounded_labels():
    registry_text = _render(task_manager_families([_snapshot()]))
    families = _parse(registry_text)
    samples = families["flink_taskmanager_job_task_numRecordsOut"]
    assert sorted(s.value for s in samples) == [10.0, 11.0]
    assert set(samples[0].labels) == {"job_id", "job_name", "task_id", "task_name",
                                      "subtask_index", "tm_id"}
    assert samples[0].labels["job_name"] == "word count"
    assert samples[0].labels["tm_id"] == "127.0.0.1:1234-abc"
    assert "attempt" not in registry_text
    assert families["flink_taskmanager_taskSlotsAvailable"][0].value == 3
    assert families["flink_taskmanager_Status_Python_Memory_RSS"][0].value > 1_000_000
    assert families["flink_taskmanager_job_task_accumulateBusyTimeMs"][0].value == 1000


def test_job_manager_families_count_jobs_by_state():
    overview = ClusterOverview(ResourceOverview(2, 8, 5), 1, 3, 0, 1)
    jobs = [JobDetails(JobID.generate(), "j", 0, -1, 0, state, 0, {})
            for state in (JobStatus.RUNNING, JobStatus.FINISHED, JobStatus.FINISHED)]
    families = _parse(_render(job_manager_families(overview, jobs, process_stats())))
    assert families["flink_jobmanager_taskSlotsTotal"][0].value == 8
    assert families["flink_jobmanager_numRegisteredTaskManagers"][0].value == 2
    by_state = {s.labels["state"]: s.value for s in families["flink_jobmanager_numJobs"]}
    assert by_state["FINISHED"] == 2 and by_state["RUNNING"] == 1 and by_state["FAILED"] == 0


def _render(families) -> str:
    async def source():
        return families

    return asyncio.run(PrometheusReporter([source]).render()).decode()


def test_parse_ports():
    assert parse_ports("9249") == [9249]
    assert parse_ports("9249-9251") == [9249, 9250, 9251]
    with pytest.raises(ValueError):
        parse_ports("x")


def test_endpoint_skips_busy_ports_and_failing_sources():
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]

    async def good():
        return task_manager_families([_snapshot()])

    async def broken():
        raise ConnectionError("TaskExecutor gone")

    async def body() -> None:
        reporter = PrometheusReporter([broken, good], "127.0.0.1", [port, 0])
        await reporter.start()
        try:
            assert reporter.port != port
            async with httpx.AsyncClient() as client:
                r = await client.get(reporter.url)
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/plain")
            assert "flink_taskmanager_job_task_numRecordsOut" in r.text
        finally:
            await reporter.stop()

    try:
        asyncio.run(body())
    finally:
        busy.close()


def test_no_endpoint_without_the_port_key_and_a_clear_error_when_all_ports_are_busy():
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]

    async def body() -> None:
        assert await start_prometheus_reporter(Configuration(), []) is None
        with pytest.raises(OSError, match="no free port in metrics.reporter.prom.port"):
            await start_prometheus_reporter(
                Configuration({"metrics.reporter.prom.port": str(port)}), [])

    try:
        asyncio.run(body())
    finally:
        busy.close()
