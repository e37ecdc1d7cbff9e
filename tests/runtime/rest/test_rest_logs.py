"""Log, TaskManager and JobManager endpoints: list, whole/paged/ranged reads, traversal, 404s."""

from __future__ import annotations

from pathlib import Path

import pytest

from flintlock.runtime.dispatcher.gateway import ClusterOverview
from flintlock.runtime.ids import ResourceID
from flintlock.runtime.logs import LogDirectory
from flintlock.runtime.logs.files import MAX_LOG_CHUNK_BYTES
from flintlock.runtime.metrics.process import process_stats
from flintlock.runtime.metrics.task_manager_metrics import TaskManagerMetricsSnapshot
from flintlock.runtime.resourcemanager.exceptions import UnknownTaskExecutorException
from flintlock.runtime.resourcemanager.gateway import ResourceOverview, TaskManagerInfo
from flintlock.runtime.rest.jar_store import JarStore
from flintlock.runtime.rest.observability import ObservabilityContext
from flintlock.runtime.rpc.exceptions import RemoteError

PREFIXES = pytest.mark.parametrize("prefix", ["/v1", ""])
TM = "127.0.0.1:40123-abcdef"
BIG = b"".join(b"line %07d\n" % i for i in range(200_000))  # 2.6 MB: several chunks


@pytest.fixture
def tm_logs(rest, tmp_path: Path):
    """The harness's dispatcher serves one TaskManager's LogDirectory."""
    logs = LogDirectory(tmp_path / "tm")
    logs.set_main_log("flintlock-taskmanager.log").write_text("TaskExecutor started\n")
    logs.register("task-a.log").write_bytes(b"0123456789")
    logs.register("big.log").write_bytes(BIG)
    (tmp_path / "tm" / "not-registered.log").write_text("private")

    def known(resource_id: ResourceID) -> None:
        if str(resource_id) != TM:
            raise UnknownTaskExecutorException(f"No TaskExecutor registered under {resource_id}.")

    def log_list(resource_id):
        known(resource_id)
        return logs.list_logs()

    def read(resource_id, name, start, count):
        known(resource_id)
        return logs.read(name, start, count)

    rest.on("request_task_manager_log_list", log_list)
    rest.on("request_task_manager_log", read)
    return rest


@PREFIXES
def test_log_list(tm_logs, prefix):
    body = tm_logs.client.get(f"{prefix}/taskmanagers/{TM}/logs").json()
    assert {e["name"] for e in body["logs"]} == {"flintlock-taskmanager.log", "task-a.log",
                                                 "big.log"}
    entry = next(e for e in body["logs"] if e["name"] == "task-a.log")
    assert entry["size"] == 10 and entry["mtime"] > 1_600_000_000_000


def test_whole_file_is_streamed_in_chunks(tm_logs):
    r = tm_logs.client.get(f"/taskmanagers/{TM}/logs/big.log")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert r.headers["x-log-size"] == str(len(BIG))
    assert r.content == BIG
    reads = tm_logs.calls("request_task_manager_log")
    assert len(reads) == -(-len(BIG) // MAX_LOG_CHUNK_BYTES)  # ceil: one RPC per chunk


@pytest.mark.parametrize(("params", "data", "start"), [
    ({"start": 2, "count": 3}, b"234", 2),
    ({"offset": 2, "length": 3}, b"234", 2),
    ({"start": -4}, b"6789", 6),
    ({"start": 50}, b"", 10),
])
def test_paged_reads(tm_logs, params, data, start):
    r = tm_logs.client.get(f"/taskmanagers/{TM}/logs/task-a.log", params=params)
    assert r.status_code == 200
    assert r.content == data
    assert (r.headers["x-log-start"], r.headers["x-log-end"], r.headers["x-log-size"]) == (
        str(start), str(start + len(data)), "10")


def test_range_header_and_download(tm_logs):
    url = f"/taskmanagers/{TM}/logs/task-a.log"
    r = tm_logs.client.get(url, headers={"Range": "bytes=1-3"})
    assert (r.status_code, r.content, r.headers["content-range"]) == (206, b"123", "bytes 1-3/10")
    r = tm_logs.client.get(url, headers={"Range": "bytes=-2"})
    assert (r.status_code, r.content) == (206, b"89")
    assert tm_logs.client.get(url, headers={"Range": "bytes=20-"}).status_code == 416
    assert tm_logs.client.get(url, headers={"Range": "lines=1-2"}).status_code == 400
    r = tm_logs.client.get(url, params={"download": "true"})
    assert r.headers["content-disposition"] == 'attachment; filename="task-a.log"'


def test_main_log_and_stdout(tm_logs):
    assert tm_logs.client.get(f"/taskmanagers/{TM}/log").text == "TaskExecutor started\n"
    r = tm_logs.client.get(f"/taskmanagers/{TM}/stdout")  # stdout goes to the process log
    assert (r.status_code, r.text) == (200, "TaskExecutor started\n")


@pytest.mark.parametrize("name", ["..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd", ".hidden",
                                  "a%00b.log", "..", "x" * 300])
def test_traversal_and_malformed_names_never_reach_the_task_manager(tm_logs, name):
    r = tm_logs.client.get(f"/taskmanagers/{TM}/logs/{name}")
    assert r.status_code in (400, 404), r.text
    assert tm_logs.calls("request_task_manager_log") == []


def test_unregistered_file_unknown_task_manager_and_bad_ids(tm_logs):
    r = tm_logs.client.get(f"/taskmanagers/{TM}/logs/not-registered.log")
    assert r.status_code == 404 and "not-registered.log" in r.json()["errors"][0]
    r = tm_logs.client.get("/taskmanagers/tm-9/logs")
    assert r.status_code == 404 and "tm-9" in r.json()["errors"][0]
    r = tm_logs.client.get("/taskmanagers/tm%20x/logs")
    assert r.status_code == 400


def test_remote_not_found_errors_become_404(rest):
    def remote(*_args):
        raise RemoteError("flintlock.runtime.logs.exceptions.LogFileNotFoundException",
                          "No log file named 'x.log' here.", "")

    rest.on("request_task_manager_log", remote)
    r = rest.client.get(f"/taskmanagers/{TM}/logs/x.log")
    assert r.status_code == 404 and r.json() == {"errors": ["No log file named 'x.log' here."]}


# ---- JobManager ----------------------------------------------------------------------------------


@pytest.fixture
def jm(rest, tmp_path: Path):
    logs = LogDirectory(tmp_path / "jm")
    logs.set_main_log("flintlock-jobmanager.log").write_text("JobManager serving\n")
    rest.client.app.state.observability = ObservabilityContext(logs, JarStore(str(tmp_path)))
    return rest


@PREFIXES
def test_job_manager_logs(jm, prefix):
    body = jm.client.get(f"{prefix}/jobmanager/logs").json()
    assert [e["name"] for e in body["logs"]] == ["flintlock-jobmanager.log"]
    assert jm.client.get(f"{prefix}/jobmanager/log").text == "JobManager serving\n"
    assert jm.client.get(f"{prefix}/jobmanager/stdout").text == "JobManager serving\n"
    assert jm.client.get(f"{prefix}/jobmanager/logs/flintlock-jobmanager.log",
                         params={"start": -8}).text == "serving\n"
    assert jm.client.get(f"{prefix}/jobmanager/logs/other.log").status_code == 404
    assert jm.client.get(f"{prefix}/jobmanager/logs/..%2Fsecret").status_code in (400, 404)


def test_job_manager_without_log_files(rest):
    assert rest.client.get("/jobmanager/logs").json() == {"logs": []}
    r = rest.client.get("/jobmanager/log")
    assert r.status_code == 404 and "env.log.dir" in r.json()["errors"][0]


def test_job_manager_config_masks_secrets(make_rest):
    h = make_rest({"rest.port": "0", "security.cluster.secret": "hunter2",
                   "parallelism.default": "3"})
    entries = h.client.get("/v1/jobmanager/config").json()
    assert [e["key"] for e in entries] == sorted(e["key"] for e in entries)
    values = {e["key"]: e["value"] for e in entries}
    assert values["parallelism.default"] == "3"
    assert values["security.cluster.secret"] == "******"
    assert "hunter2" not in str(entries)


def test_job_manager_metrics(rest):
    rest.on("request_cluster_overview", lambda: ClusterOverview(ResourceOverview(2, 8, 3), 1, 4, 2, 1))
    ids = {m["id"] for m in rest.client.get("/jobmanager/metrics").json()}
    assert {"numRunningJobs", "taskSlotsTotal", "taskSlotsAvailable", "numRegisteredTaskManagers",
            "Status.Python.Memory.RSS"} <= ids
    body = rest.client.get("/jobmanager/metrics",
                           params={"get": "taskSlotsAvailable,numRegisteredTaskManagers"}).json()
    assert body == [{"id": "taskSlotsAvailable", "value": "3"},
                    {"id": "numRegisteredTaskManagers", "value": "2"}]


# ---- TaskManager details and metrics -------------------------------------------------------------


def test_task_manager_details_with_spark_and_metrics(rest):
    info = TaskManagerInfo(ResourceID(TM), "grpc://127.0.0.1:40123/taskexecutor", 0, 2, 1, 5,
                           spark={"master": "local[2]", "version": "4.3.0"})
    rest.on("request_task_manager_infos", lambda: (info,))
    rest.on("request_task_manager_metrics",
            lambda rid: TaskManagerMetricsSnapshot(str(rid), 1, process_stats(), 2, 1, 1))
    body = rest.client.get(f"/taskmanagers/{TM}").json()
    assert body["spark"] == {"master": "local[2]", "version": "4.3.0"}
    assert (body["slotsNumber"], body["freeSlots"]) == (2, 1)
    (listed,) = rest.client.get("/taskmanagers").json()["taskmanagers"]
    assert listed["spark"]["master"] == "local[2]"
    metrics = rest.client.get(f"/taskmanagers/{TM}/metrics",
                              params={"get": "taskSlotsTotal,Status.Python.Memory.RSS"}).json()
    assert metrics[0] == {"id": "taskSlotsTotal", "value": "2"}
    assert int(metrics[1]["value"]) > 1_000_000
