"""``/taskmanagers/metrics`` and ``/jobs/metrics``: metrics aggregated over TaskManagers and jobs
(Flink's ``AggregatingTaskManagersMetricsHandler`` / ``AggregatingJobsMetricsHandler``), on both
path forms, next to ``/taskmanagers/:id`` and ``/jobs/:jobid`` which they must not be taken for."""

from __future__ import annotations

import pytest

from flintlock.runtime.dispatcher.exceptions import FlinkJobNotFoundException
from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph, JobDetails
from flintlock.runtime.ids import JobID, ResourceID
from flintlock.runtime.jobgraph.types import JobStatus, JobType
from flintlock.runtime.metrics.process import process_stats
from flintlock.runtime.metrics.task_manager_metrics import TaskManagerMetricsSnapshot
from flintlock.runtime.resourcemanager.exceptions import UnknownTaskExecutorException
from flintlock.runtime.resourcemanager.gateway import TaskManagerInfo

PREFIXES = pytest.mark.parametrize("prefix", ["/v1", ""])
NOW_MS = 1_700_000_100_000  # the harness's clock (conftest)
HEAP = {"tm-1": 100.0, "tm-2": 300.0}  # tm-3 is registered but does not answer
RUNNING, RESTARTED = JobID.from_hex("0a" * 16), JobID.from_hex("0b" * 16)


def _info(tm: str) -> TaskManagerInfo:
    return TaskManagerInfo(ResourceID(tm), f"grpc://{tm}", 0, 2, 1, NOW_MS)


def _graph(job_id: JobID, restarts: int, running_since: int) -> ArchivedExecutionGraph:
    return ArchivedExecutionGraph(job_id, "j", JobType.STREAMING, JobStatus.RUNNING,
                                  {"RUNNING": running_since}, (), number_of_restarts=restarts)


@pytest.fixture
def cluster(rest):
    def metrics(resource_id: ResourceID) -> TaskManagerMetricsSnapshot:
        if str(resource_id) not in HEAP:
            raise UnknownTaskExecutorException(f"No TaskExecutor registered under {resource_id}.")
        return TaskManagerMetricsSnapshot(
            str(resource_id), NOW_MS, process_stats(), 2, 1, 1,
            status={"Status.JVM.Memory.Heap.Used": HEAP[str(resource_id)]})

    graphs = {RUNNING: _graph(RUNNING, 0, NOW_MS - 4000), RESTARTED: _graph(RESTARTED, 3, NOW_MS - 1000)}

    def job(job_id: JobID) -> ArchivedExecutionGraph:
        if job_id not in graphs:
            raise FlinkJobNotFoundException(job_id)
        return graphs[job_id]

    rest.on("request_task_manager_infos", lambda: tuple(_info(t) for t in ("tm-1", "tm-2", "tm-3")))
    rest.on("request_task_manager_metrics", metrics)
    rest.on("list_jobs", lambda: tuple(JobDetails(j, "j", 0, -1, 0, JobStatus.RUNNING, 0, {})
                                       for j in graphs))
    rest.on("request_job", job)
    return rest


def _get(harness, path: str, **params):
    response = harness.client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


@PREFIXES
def test_task_manager_metrics_are_aggregated_over_the_answering_task_managers(cluster, prefix):
    url = f"{prefix}/taskmanagers/metrics"
    ids = [m["id"] for m in _get(cluster, url)]
    assert "Status.JVM.Memory.Heap.Used" in ids and "taskSlotsTotal" in ids
    assert _get(cluster, url, get="Status.JVM.Memory.Heap.Used,nothing", agg="min,max,sum") == [
        {"id": "Status.JVM.Memory.Heap.Used", "min": 100.0, "max": 300.0, "sum": 400.0}]
    (heap,) = _get(cluster, url, get="Status.JVM.Memory.Heap.Used")
    assert heap == {"id": "Status.JVM.Memory.Heap.Used", "min": 100.0, "max": 300.0,
                    "avg": 200.0, "sum": 400.0, "skew": 50.0}
    # a selection; unknown ids are left out
    assert _get(cluster, url, get="Status.JVM.Memory.Heap.Used", agg="sum",
                taskmanagers="tm-2,tm-9") == [{"id": "Status.JVM.Memory.Heap.Used", "sum": 300.0}]
    assert _get(cluster, url, get="Status.JVM.Memory.Heap.Used", taskmanagers="tm-9") == []


@PREFIXES
def test_job_metrics_are_aggregated_over_jobs(cluster, prefix):
    url = f"{prefix}/jobs/metrics"
    assert {"numRestarts", "uptime"} <= {m["id"] for m in _get(cluster, url)}
    assert _get(cluster, url, get="numRestarts,uptime", agg="max,sum") == [
        {"id": "numRestarts", "max": 3.0, "sum": 3.0}, {"id": "uptime", "max": 4000.0,
                                                        "sum": 5000.0}]
    other = JobID.from_hex("0c" * 16)  # unknown: left out
    assert _get(cluster, url, get="numRestarts", agg="sum", jobs=f"{RESTARTED},{other}") == [
        {"id": "numRestarts", "sum": 3.0}]


@pytest.mark.parametrize(("path", "params", "named"), [
    ("/jobs/metrics", {"jobs": "not-a-job"}, "jobs"),
    ("/jobs/metrics", {"get": "numRestarts", "agg": "median"}, "agg"),
    ("/taskmanagers/metrics", {"taskmanagers": "tm 1"}, "taskmanagers"),
    ("/taskmanagers/metrics", {"get": "a b"}, "get"),
    ("/taskmanagers/metrics", {"taskmanagers": ",".join(["tm"] * 1001)}, "taskmanagers"),
])
def test_bad_selections_are_named(cluster, path, params, named):
    response = cluster.client.get(path, params=params)
    assert response.status_code == 400, response.text
    assert f"invalid query parameter {named}" in response.json()["errors"][0]
