"""Start-up order and slot shortage across processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from cluster_helpers import (
    FLINTLOCK,
    REPO,
    job,
    logs,
    run_remote,
    start_cluster,
    wait_for_job_state,
)

from flintlock.runtime.processes import pid_alive
from flintlock.testing.waiting import wait_until_sync

pytestmark = [pytest.mark.process, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

WIDE_PROGRAM = """
import sys, time
from flintlock import StreamExecutionEnvironment
from flintlock.connectors import FileSink

def slow(row):
    time.sleep(0.01)
    return (row.id,)

env = StreamExecutionEnvironment.get_execution_environment()
# set on the operators: the job's default parallelism would only bound an automatically sized
# vertex, which the cluster's Spark servers would then bound further
(env.from_sequence(1, 600).set_parallelism(6).map(slow, "id long").set_parallelism(6)
 .sink_to(FileSink.parquet(sys.argv[1])).set_parallelism(6))
env.execute("six subtasks on four slots")
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _daemon(args: list[str], log: Path, secret: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "FLINTLOCK_CLUSTER_SECRET": secret}
    with open(log, "wb") as out:
        return subprocess.Popen([*FLINTLOCK, "-v", *args], stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=REPO, start_new_session=True)


def test_a_task_manager_started_before_the_job_manager_registers_once_it_is_up(tmp_path: Path) -> None:
    rpc_port = _free_port()
    d = ["-D", f"jobmanager.rpc.port={rpc_port}", "-D", "jobmanager.rpc.address=127.0.0.1"]
    tm = _daemon(["taskmanager", *d, "--port-file", str(tmp_path / "tm.port")], tmp_path / "tm.log", "s3cret")
    jm: subprocess.Popen[bytes] | None = None
    try:
        # the TaskManager is up (its Spark session started) while no JobManager exists yet
        wait_until_sync(lambda: (tmp_path / "tm.port").exists() or tm.poll() is not None, 120,
                        interval_s=0.1)
        assert tm.poll() is None, logs(tmp_path)
        jm = _daemon(["jobmanager", *d, "-D", "rest.port=0", "--port-file", str(tmp_path / "jm.port")],
                     tmp_path / "jm.log", "s3cret")
        wait_until_sync(lambda: (tmp_path / "jm.port").exists(), 60, interval_s=0.05,
                        describe=lambda: logs(tmp_path))
        rest = json.loads((tmp_path / "jm.port").read_text())["rest_port"]

        def task_managers() -> Any:
            return httpx.get(f"http://127.0.0.1:{rest}/v1/overview").json()["taskmanagers"]

        wait_until_sync(lambda: task_managers() == 1, 90, interval_s=0.2,
                        describe=lambda: f"{task_managers()} TaskManagers\n{logs(tmp_path)}")
    finally:
        for proc in (tm, jm):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in (tm, jm):
            if proc is not None:
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)


def test_a_job_short_of_slots_waits_visibly_and_then_finishes(session_cluster: dict[str, Any],
                                                               tmp_path: Path) -> None:
    prog = tmp_path / "wide.py"
    prog.write_text(WIDE_PROGRAM)
    proc = run_remote(session_cluster, "-d", str(prog), str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    job_id = proc.stderr.split("JobID")[-1].split()[0]
    seen: list[Any] = []

    def waiting_for_slots() -> bool:
        details = job(session_cluster, job_id)
        tasks = details["vertices"][0]["tasks"] if details.get("vertices") else {}
        seen.append((details["state"], details.get("pending-slot-requests"), tasks))
        return bool(tasks.get("RUNNING")) and bool(tasks.get("SCHEDULED")) and \
            details.get("pending-slot-requests", 0) > 0

    # 2 TaskManagers x 2 slots: four subtasks run, two wait for a slot, visibly
    wait_until_sync(waiting_for_slots, 120, interval_s=0.05, describe=lambda: seen[-3:])
    wait_for_job_state(session_cluster, job_id, "FINISHED", 180)
    written = pq.read_table(tmp_path / "out")
    assert sorted(written.column("id").to_pylist()) == list(range(1, 601))  # each row once


def test_cluster_stop_leaves_no_process_behind(tmp_path: Path) -> None:
    """Its own cluster (the shared one serves the other tests): start, stop, nothing left."""
    cluster = start_cluster(tmp_path / "state", task_managers=1)
    info = next(cluster)
    pids = info["pids"]
    assert len(pids) == 2 and all(pid_alive(pid) for pid in pids)
    stop = subprocess.run([*FLINTLOCK, "cluster", "stop", *info["d"]], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert stop.returncode == 0, stop.stderr
    assert "jobmanager" in stop.stdout and "taskmanager-0" in stop.stdout
    assert all(not pid_alive(pid) for pid in pids)
    out = subprocess.run(["ps", "-eo", "pid,pgid,stat,args"], capture_output=True, text=True).stdout
    leftovers = [line for line in out.splitlines()[1:]
                 if int(line.split()[1]) in pids and not line.split()[2].startswith("Z")]
    # no daemon, and no Spark JVM of a TaskManager, is still running (an exited JVM may linger
    # as a zombie until the machine's init reaps it; it holds no resources)
    assert leftovers == []
    assert not list((tmp_path / "state").glob("*.pid"))
    cluster.close()  # runs the generator's `cluster stop` again: a no-op now
