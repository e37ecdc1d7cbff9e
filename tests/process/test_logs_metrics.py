"""Logs, metrics and web submission on a session cluster of separate processes (STYLE layer 4).

A failed task's log is read from its TaskManager process over RPC (REST -> Dispatcher ->
ResourceManager -> TaskExecutor); a program uploaded with ``/jars/upload`` and started with
``/jars/:jarid/run`` becomes a job that finishes; each process's Prometheus endpoint
(``metrics.reporter.prom.port=0`` in ``cluster_helpers``) shows the job's task metrics.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_helpers import SLOW_PROGRAM, job, run_remote, wait_for_job_state
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.process, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

FAILING_PROGRAM = """
import sys
from flintlock import StreamExecutionEnvironment
from flintlock.connectors import FileSink

def explode(row):
    if row.id == 5:
        raise ValueError("kaboom-process-4242")
    return (row.id,)

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
env.from_sequence(1, 20).map(explode, "id long").sink_to(FileSink.parquet(sys.argv[1]))
env.execute("failing for logs")
"""


def _job_id(stderr: str) -> str:
    found = re.search(r"JobID ([0-9a-f]{32})", stderr)
    assert found, stderr[-3000:]
    return found.group(1)


def _port_files(cluster: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in Path(cluster["state"]).glob("*.port")}


def test_failed_task_log_from_another_process(session_cluster: dict[str, Any],
                                              tmp_path: Path) -> None:
    rest = session_cluster["rest"]
    program = tmp_path / "failing.py"
    program.write_text(FAILING_PROGRAM)
    proc = run_remote(session_cluster, "-d", str(program), str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    job_id = _job_id(proc.stderr)
    wait_for_job_state(session_cluster, job_id, "FAILED", 180)
    (vertex,) = job(session_cluster, job_id)["vertices"]
    attempt = httpx.get(f"{rest}/jobs/{job_id}/vertices/{vertex['id']}/subtasks/0").json()
    assert attempt["status"] == "FAILED"
    log = httpx.get(f"{rest}{attempt['log-url']}", timeout=30)
    assert log.status_code == 200, log.text
    assert "kaboom-process-4242" in log.text
    assert "switched from RUNNING to FAILED" in log.text
    tm = attempt["taskmanager-id"]
    names = [e["name"] for e in httpx.get(f"{rest}/taskmanagers/{tm}/logs").json()["logs"]]
    assert attempt["log-file"] in names
    assert any(n.startswith("flintlock-taskmanager-") for n in names)
    tail = httpx.get(f"{rest}/taskmanagers/{tm}/log", params={"start": -200_000}, timeout=30)
    assert tail.status_code == 200 and int(tail.headers["x-log-size"]) > 0
    assert "Received task" in tail.text
    jm_logs = httpx.get(f"{rest}/jobmanager/logs").json()["logs"]
    assert len(jm_logs) == 1 and jm_logs[0]["name"].startswith("flintlock-jobmanager-")
    assert "JobManager serving" in httpx.get(f"{rest}/jobmanager/log", timeout=30).text
    bad = httpx.get(f"{rest}/taskmanagers/{tm}/logs/..%2F..%2Fetc%2Fpasswd")
    assert bad.status_code in (400, 404)
    assert httpx.get(f"{rest}/taskmanagers/{tm}/logs/passwd").status_code == 404


def test_web_submission_and_prometheus(session_cluster: dict[str, Any], tmp_path: Path) -> None:
    rest = session_cluster["rest"]
    secret = (Path(session_cluster["state"]) / "secret").read_text().strip()
    auth = {"Authorization": f"Bearer {secret}"}
    upload = httpx.post(f"{rest}/jars/upload", headers=auth,
                        files={"jarfile": ("slow.py", SLOW_PROGRAM.encode(), "text/x-python")})
    assert upload.status_code == 200, upload.text
    jar_id = Path(upload.json()["filename"]).name
    assert jar_id in {f["id"] for f in httpx.get(f"{rest}/jars").json()["files"]}
    out = tmp_path / "out"
    run = httpx.post(f"{rest}/jars/{jar_id}/run", headers=auth, timeout=120,
                     json={"programArgsList": [str(out), "30", "web submitted"]})
    assert run.status_code == 200, run.text
    job_id = run.json()["jobid"]
    listed = httpx.get(f"{rest}/jobs/overview").json()["jobs"]
    assert [j["name"] for j in listed if j["jid"] == job_id] == ["web submitted"]
    wait_for_job_state(session_cluster, job_id, "FINISHED", 180)
    assert any(out.glob("*.parquet"))
    (vertex,) = job(session_cluster, job_id)["vertices"]
    body = httpx.get(f"{rest}/jobs/{job_id}/vertices/{vertex['id']}/subtasks/metrics",
                     params={"get": "numRecordsOut", "agg": "sum"}).json()
    assert body == [{"id": "numRecordsOut", "sum": 30.0}]

    ports = _port_files(session_cluster)
    records_out = 0.0
    for name, port_file in ports.items():
        scrape = httpx.get(f"http://127.0.0.1:{port_file['metrics_port']}/metrics", timeout=30)
        assert scrape.status_code == 200
        families = {f.name: f.samples for f in text_string_to_metric_families(scrape.text)}
        if name == "jobmanager":
            assert families["flink_jobmanager_numRegisteredTaskManagers"][0].value == 2
            continue
        assert families["flink_taskmanager_taskSlotsTotal"][0].value == 2
        records_out += sum(s.value for s in families["flink_taskmanager_job_task_numRecordsOut"]
                           if s.labels["job_id"] == job_id)
        assert "attempt" not in scrape.text
    assert records_out == 30  # one chained vertex: source -> map -> sink wrote 30 rows
    delete = httpx.delete(f"{rest}/jars/{jar_id}", headers=auth)
    assert delete.status_code == 200

