"""What Flink 2.1's web dashboard reads of the cluster (issue 17): JobManager environment,
thread dumps, profiler, per-job JobManager views and log urls, TaskManager resources, slots and
``Status.*`` metrics. Every path is served with and without ``/v1``."""

from __future__ import annotations

import platform
import re

import pytest

from flintlock.runtime.dispatcher.gateway import ClusterOverview
from flintlock.runtime.ids import JobID, ResourceID
from flintlock.runtime.metrics.process import process_stats
from flintlock.runtime.metrics.status import (
    JOB_MANAGER_DASHBOARD_METRICS,
    TASK_MANAGER_DASHBOARD_METRICS,
)
from flintlock.runtime.metrics.task_manager_metrics import TaskManagerMetricsSnapshot
from flintlock.runtime.resourcemanager.exceptions import UnknownTaskExecutorException
from flintlock.runtime.resourcemanager.gateway import ResourceOverview, TaskManagerInfo
from flintlock.runtime.thread_dump import ThreadInfo

PREFIXES = pytest.mark.parametrize("prefix", ["/v1", ""])
NOW_MS = 1_700_000_100_000  # the harness's clock (conftest)
TM = "127.0.0.1:40123-abcdef"
JOB = JobID.from_hex("0f" * 16)
MIB = 1 << 20
MEMORY = {
    "frameworkHeap": 300 * MIB, "taskHeap": 290 * MIB, "frameworkOffHeap": 0, "taskOffHeap": 0,
    "networkMemory": 0, "managedMemory": 434 * MIB, "jvmMetaspace": 80 * MIB, "jvmOverhead": 0,
    "totalFlinkMemory": 1024 * MIB, "totalProcessMemory": 1104 * MIB,
}
STATUS = {
    "Status.JVM.Memory.Heap.Used": 69_073_920.0, "Status.JVM.Memory.Heap.Committed": 143_654_912.0,
    "Status.JVM.Memory.Heap.Max": 1_073_741_824.0, "Status.JVM.Memory.NonHeap.Used": 105_808_096.0,
    "Status.JVM.Memory.NonHeap.Committed": 107_741_184.0, "Status.JVM.Memory.NonHeap.Max": -1.0,
    "Status.JVM.Memory.Metaspace.Used": 82_330_368.0, "Status.JVM.Memory.Metaspace.Max": -1.0,
    "Status.JVM.Memory.Direct.Count": 5.0, "Status.JVM.Memory.Direct.MemoryUsed": 24_577.0,
    "Status.JVM.Memory.Direct.TotalCapacity": 24_576.0,
    "Status.JVM.GarbageCollector.G1_Young_Generation.Count": 11.0,
    "Status.JVM.GarbageCollector.G1_Young_Generation.Time": 157.0,
    "Status.Flink.Memory.Managed.Used": 118_677.0,
    "Status.Flink.Memory.Managed.Total": 455_501_414.0,
    "Status.Shuffle.Netty.UsedMemory": 0.0, "Status.Shuffle.Netty.TotalMemory": 0.0,
}


def _tm(slots: int = 4, free: int = 3, jobs: tuple[JobID, ...] = (JOB,)) -> TaskManagerInfo:
    return TaskManagerInfo(
        ResourceID(TM), "grpc://127.0.0.1:40123/taskexecutor", 0, slots, free, NOW_MS - 5,
        hardware={"cpuCores": 8, "physicalMemory": 1 << 34, "freeMemory": 1 << 30,
                  "managedMemory": MEMORY["managedMemory"]},
        cpu_cores=2.0, memory=MEMORY, allocated_slots=jobs)


@pytest.fixture
def tm_rest(rest):
    """One TaskManager, TM, with 4 slots, one of them allocated to JOB, and metrics."""

    def known(resource_id: ResourceID) -> None:
        if str(resource_id) != TM:
            raise UnknownTaskExecutorException(f"No TaskExecutor registered under {resource_id}.")

    def metrics(resource_id: ResourceID) -> TaskManagerMetricsSnapshot:
        known(resource_id)
        return TaskManagerMetricsSnapshot(str(resource_id), NOW_MS, process_stats(), 4, 3, 1,
                                          status=dict(STATUS))

    def dump(resource_id: ResourceID, max_depth: int) -> tuple[ThreadInfo, ...]:
        known(resource_id)
        return (ThreadInfo("Sink (1/1)#0", f'"Sink (1/1)#0" Id=7 WAITING\n\tat x.y(z.py:1)\n'
                                           f'\t...\n\n{max_depth}'),)

    rest.on("request_task_manager_infos", lambda: (_tm(),))
    rest.on("request_task_manager_metrics", metrics)
    rest.on("request_task_manager_thread_dump", dump)
    return rest


# ---- JobManager ----------------------------------------------------------------------------------


@PREFIXES
def test_job_manager_environment_describes_the_python_process(rest, prefix):
    body = rest.client.get(f"{prefix}/jobmanager/environment").json()
    assert set(body) == {"jvm", "classpath"} and set(body["jvm"]) == {"version", "arch", "options"}
    assert platform.python_version() in body["jvm"]["version"]
    assert body["jvm"]["arch"] == platform.machine()
    assert isinstance(body["jvm"]["options"], list)
    assert body["classpath"] and all(isinstance(p, str) and p for p in body["classpath"])
    job_view = rest.client.get(f"{prefix}/jobs/{JOB}/jobmanager/environment").json()
    assert job_view == body


@PREFIXES
def test_job_manager_thread_dump_has_the_stacks_of_the_process(rest, prefix):
    body = rest.client.get(f"{prefix}/jobmanager/thread-dump").json()
    infos = body["threadInfos"]
    assert set(body) == {"threadInfos"} and infos
    assert all(set(i) == {"threadName", "stringifiedThreadInfo"} for i in infos)
    assert all(re.match(rf'"{re.escape(i["threadName"])}" Id=\d+ (RUNNABLE|WAITING|TIMED_WAITING)\n',
                        i["stringifiedThreadInfo"]) for i in infos)
    main = next(i for i in infos if i["threadName"] == "MainThread")["stringifiedThreadInfo"]
    # the test thread waits for this very request
    assert "test_job_manager_thread_dump_has_the_stacks_of_the_process" in main


def test_thread_dump_depth_is_configurable(make_rest):
    rest = make_rest({"cluster.thread-dump.stacktrace-max-depth": "2"})
    infos = rest.client.get("/jobmanager/thread-dump").json()["threadInfos"]
    for info in infos:
        assert len(re.findall(r"^\tat ", info["stringifiedThreadInfo"], re.M)) <= 2


@PREFIXES
def test_per_job_job_manager_config_is_the_cluster_configuration_with_secrets_hidden(make_rest,
                                                                                     prefix):
    rest = make_rest({"spark.hadoop.fs.s3a.secret.key": "hunter2", "parallelism.default": "3"})
    cluster = rest.client.get(f"{prefix}/jobmanager/config").json()
    job_view = rest.client.get(f"{prefix}/jobs/{JOB}/jobmanager/config").json()
    assert job_view == cluster
    values = {e["key"]: e["value"] for e in job_view}
    assert values["parallelism.default"] == "3"
    assert values["spark.hadoop.fs.s3a.secret.key"] == "******"
    assert "hunter2" not in str(job_view)
    bad = rest.client.get(f"{prefix}/jobs/not-a-job/jobmanager/config")
    assert bad.status_code == 400 and "jobid" in bad.json()["errors"][0]


@PREFIXES
def test_log_urls_point_at_the_dashboard_pages(tm_rest, prefix):
    url = tm_rest.client.get(f"{prefix}/jobs/{JOB}/jobmanager/log-url").json()
    assert url == {"url": "http://localhost/#/job-manager/logs"}
    url = tm_rest.client.get(f"{prefix}/jobs/{JOB}/taskmanagers/{TM}/log-url").json()
    assert url == {"url": f"http://localhost/#/task-manager/{TM}/logs"}
    assert tm_rest.client.get(f"{prefix}/jobs/{JOB}/taskmanagers/a%20b/log-url").status_code == 400


@PREFIXES
def test_job_manager_profiler_lists_the_runs_that_failed_at_once(rest, prefix):
    assert rest.client.get(f"{prefix}/jobmanager/profiler").json() == {"profilingList": []}
    refused = rest.client.post(f"{prefix}/jobmanager/profiler", json={"mode": "CPU", "duration": 1})
    assert refused.status_code == 401  # state-changing: needs the secret
    rest.client.headers["Authorization"] = f"Bearer {rest.secret}"
    run = rest.client.post(f"{prefix}/jobmanager/profiler", json={"mode": "CPU", "duration": 10})
    assert run.status_code == 200
    info = run.json()
    assert info["status"] == "FAILED" and "Python process" in info["message"]
    assert (info["mode"], info["duration"], info["outputFile"]) == ("CPU", 10, None)
    assert info["triggerTime"] == info["finishedTime"] == NOW_MS
    rest.client.post(f"{prefix}/jobmanager/profiler", json={"mode": "WALL", "duration": 5})
    listed = rest.client.get(f"{prefix}/jobmanager/profiler").json()["profilingList"]
    assert [r["mode"] for r in listed] == ["WALL", "CPU"]  # newest first
    for body in ({"mode": "CPU", "duration": 0}, {"mode": "CPU", "duration": 301},
                 {"mode": "SLOW", "duration": 5}, {"duration": 5}):
        assert rest.client.post(f"{prefix}/jobmanager/profiler", json=body).status_code == 400


@PREFIXES
def test_job_manager_metrics_answer_the_dashboard_names(rest, prefix):
    rest.on("request_cluster_overview",
            lambda: ClusterOverview(ResourceOverview(1, 4, 3), 1, 0, 0, 0))
    ids = [m["id"] for m in rest.client.get(f"{prefix}/jobmanager/metrics").json()]
    gc_names = [i for i in ids if "Status.JVM.GarbageCollector" in i]  # what the page lists
    assert "Status.JVM.GarbageCollector.Python_gen0.Count" in gc_names
    wanted = [*JOB_MANAGER_DASHBOARD_METRICS, *gc_names]
    body = rest.client.get(f"{prefix}/jobmanager/metrics", params={"get": ",".join(wanted)}).json()
    values = {m["id"]: float(m["value"]) for m in body}
    assert set(values) == set(wanted)
    assert values["Status.JVM.Memory.Heap.Used"] > 1_000_000
    assert values["Status.JVM.Memory.Heap.Max"] >= values["Status.JVM.Memory.Heap.Used"]


# ---- TaskManagers --------------------------------------------------------------------------------


@PREFIXES
def test_task_manager_resources_slots_and_memory(tm_rest, prefix):
    (listed,) = tm_rest.client.get(f"{prefix}/taskmanagers").json()["taskmanagers"]
    assert listed["totalResource"] == {"cpuCores": 2.0, "taskHeapMemory": 290,
                                       "taskOffHeapMemory": 0, "managedMemory": 434,
                                       "networkMemory": 0, "extendedResources": {}}
    # three of four slots free: three quarters of the total
    assert listed["freeResource"] == {"cpuCores": 1.5, "taskHeapMemory": 217,
                                      "taskOffHeapMemory": 0, "managedMemory": 325,
                                      "networkMemory": 0, "extendedResources": {}}
    assert listed["memoryConfiguration"] == MEMORY
    assert listed["hardware"] == {"cpuCores": 8, "physicalMemory": 1 << 34,
                                  "freeMemory": 1 << 30, "managedMemory": 434 * MIB}
    details = tm_rest.client.get(f"{prefix}/taskmanagers/{TM}").json()
    assert details["allocatedSlots"] == [{"jobId": str(JOB), "resource": {
        "cpuCores": 0.5, "taskHeapMemory": 72, "taskOffHeapMemory": 0, "managedMemory": 108,
        "networkMemory": 0, "extendedResources": {}}}]
    assert {k: v for k, v in details.items() if k not in ("allocatedSlots", "metrics")} == listed


@PREFIXES
def test_task_manager_details_metrics_come_from_its_status_metrics(tm_rest, prefix):
    metrics = tm_rest.client.get(f"{prefix}/taskmanagers/{TM}").json()["metrics"]
    assert (metrics["heapUsed"], metrics["heapCommitted"], metrics["heapMax"]) == (
        69_073_920, 143_654_912, 1_073_741_824)
    assert (metrics["nonHeapUsed"], metrics["nonHeapMax"]) == (105_808_096, -1)
    assert (metrics["directCount"], metrics["directUsed"], metrics["directMax"]) == (
        5, 24_577, 24_576)
    assert (metrics["mappedCount"], metrics["memorySegmentsTotal"]) == (0, 0)  # not reported
    assert metrics["garbageCollectors"] == [
        {"name": "G1_Young_Generation", "count": 11, "time": 157}]


def test_task_manager_details_without_metrics_show_zeros(tm_rest):
    def unreachable(resource_id):
        raise TimeoutError("no answer")

    tm_rest.on("request_task_manager_metrics", unreachable)
    metrics = tm_rest.client.get(f"/taskmanagers/{TM}").json()["metrics"]
    assert metrics["heapUsed"] == 0 and metrics["garbageCollectors"] == []


def test_a_task_manager_without_resources_reports_zeros_not_nothing(tm_rest):
    tm_rest.on("request_task_manager_infos", lambda: (TaskManagerInfo(
        ResourceID(TM), "inproc://te", 0, 2, 2, NOW_MS),))
    body = tm_rest.client.get(f"/taskmanagers/{TM}").json()
    assert body["totalResource"]["cpuCores"] == 0.0 and body["allocatedSlots"] == []
    assert set(body["memoryConfiguration"].values()) == {0}


@PREFIXES
def test_task_manager_metrics_answer_the_dashboard_names(tm_rest, prefix):
    body = tm_rest.client.get(f"{prefix}/taskmanagers/{TM}/metrics",
                              params={"get": ",".join(TASK_MANAGER_DASHBOARD_METRICS)}).json()
    values = {m["id"]: m["value"] for m in body}
    assert list(values) == list(TASK_MANAGER_DASHBOARD_METRICS)
    assert values["Status.Flink.Memory.Managed.Total"] == "455501414"
    assert values["Status.JVM.Memory.Metaspace.Max"] == "-1"


@PREFIXES
def test_task_manager_thread_dump_is_fetched_from_the_task_manager(tm_rest, prefix):
    body = tm_rest.client.get(f"{prefix}/taskmanagers/{TM}/thread-dump").json()
    (info,) = body["threadInfos"]
    assert info["threadName"] == "Sink (1/1)#0"
    assert info["stringifiedThreadInfo"].startswith('"Sink (1/1)#0" Id=7 WAITING\n')
    assert info["stringifiedThreadInfo"].endswith("50")  # the default depth was asked for
    missing = tm_rest.client.get(f"{prefix}/taskmanagers/tm-9/thread-dump")
    assert missing.status_code == 404 and "tm-9" in missing.json()["errors"][0]


@PREFIXES
def test_task_manager_profiler(tm_rest, prefix):
    path = f"{prefix}/taskmanagers/{TM}/profiler"
    assert tm_rest.client.get(path).json() == {"profilingList": []}
    assert tm_rest.client.post(path, json={"mode": "CPU", "duration": 1}).status_code == 401
    assert tm_rest.client.get(path).json() == {"profilingList": []}
    tm_rest.client.headers["Authorization"] = f"Bearer {tm_rest.secret}"
    info = tm_rest.client.post(path, json={"mode": "ITIMER", "duration": 30}).json()
    assert info["status"] == "FAILED" and TM in info["message"]
    assert tm_rest.client.get(path).json()["profilingList"] == [info]
    assert tm_rest.client.get("/jobmanager/profiler").json() == {"profilingList": []}
    assert tm_rest.client.get(f"{prefix}/taskmanagers/tm-9/profiler").status_code == 404
    assert tm_rest.client.post(f"{prefix}/taskmanagers/tm-9/profiler",
                               json={"mode": "CPU", "duration": 1}).status_code == 404
