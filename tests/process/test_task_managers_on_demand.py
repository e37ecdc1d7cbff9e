"""A session cluster whose ResourceManager starts and stops TaskManager processes itself
(``resourcemanager.type: active``), used through the CLI and REST only (STYLE layer 4)."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_helpers import job, parquet_ids, run_remote, start_cluster, wait_for_job_state

from flintlock.runtime.processes import pid_alive
from flintlock.testing.waiting import wait_until_sync

pytestmark = [pytest.mark.process, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

#: argv: <output dir> <rows> <job name>; two subtasks, a slow map, a FileSink
PROGRAM = """
import sys, time
from flintlock import StreamExecutionEnvironment
from flintlock.connectors import FileSink

def slow(row):
    time.sleep(0.005)
    return (row.id,)

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.from_sequence(1, int(sys.argv[2])).map(slow, "id long").sink_to(FileSink.parquet(sys.argv[1]))
env.execute(sys.argv[3])
"""


def _children(pid: int) -> set[int]:
    """The live child processes of ``pid`` (Linux ``/proc``)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


@pytest.fixture
def active_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    options = ("resourcemanager.type=active", *getattr(request, "param", ()))
    yield from start_cluster(tmp_path / "state", task_managers=0, slots=1, options=options)


@pytest.mark.parametrize("active_cluster", [("resourcemanager.taskmanager-timeout=3 s",)],
                         indirect=True)
def test_task_managers_are_started_for_a_job_replaced_when_killed_and_stopped_when_idle(
        active_cluster: dict[str, Any], tmp_path: Path) -> None:
    cluster = active_cluster
    jm_pid = int((cluster["state"] / "jobmanager.pid").read_text())
    assert httpx.get(f"{cluster['rest']}/overview").json()["taskmanagers"] == 0
    assert _children(jm_pid) == set()
    program, out = tmp_path / "job.py", tmp_path / "out"
    program.write_text(PROGRAM)
    submit = run_remote(cluster, "-d", "-D", "restart-strategy.type=fixed-delay",
                        "-D", "restart-strategy.fixed-delay.attempts=3", str(program), str(out),
                        "6000", "on-demand")
    assert submit.returncode == 0, submit.stderr[-3000:]
    job_id = submit.stderr.split("JobID")[-1].split()[0]

    # two subtasks, one slot per TaskManager: the JobManager starts two TaskManager processes,
    # listed by REST while they start (a TaskManager takes seconds to register)
    pending = wait_until_sync(
        lambda: (p := httpx.get(f"{cluster['rest']}/taskmanagers").json()["pendingTaskManagers"])
        and p, 60, interval_s=0.1,
        describe=lambda: httpx.get(f"{cluster['rest']}/taskmanagers").json())
    assert {(p["state"], p["slotsNumber"]) for p in pending} == {("STARTING", 1)}, pending
    workers = wait_until_sync(lambda: len(c := _children(jm_pid)) == 2 and c, 120,
                              interval_s=0.2, describe=lambda: _children(jm_pid))
    wait_until_sync(lambda: job(cluster, job_id)["vertices"][0]["tasks"]["RUNNING"] == 2, 120,
                    interval_s=0.2, describe=lambda: job(cluster, job_id)["vertices"])
    killed = min(workers)
    os.kill(killed, signal.SIGKILL)  # its subtask fails; a new TaskManager replaces it
    wait_for_job_state(cluster, job_id, "FINISHED", 300)
    assert parquet_ids(out) == list(range(1, 6001))  # every row once, despite the restart
    infos = httpx.get(f"{cluster['rest']}/taskmanagers").json()["taskmanagers"]
    assert all(re.fullmatch(r"taskmanager-[0-9a-f]{6}-\d+", tm["id"]) for tm in infos), infos
    workers |= _children(jm_pid)
    log_file = next((cluster["state"] / "log").glob("flintlock-jobmanager-*.log"))
    log = log_file.read_text()
    assert f"TaskManager process {killed} exited with code -9" in log, log[-3000:]
    assert log.count("Starting TaskManager") == 3, log[-3000:]

    # idle for resourcemanager.taskmanager-timeout: stopped, and their processes end
    wait_until_sync(lambda: not httpx.get(f"{cluster['rest']}/taskmanagers").json()["taskmanagers"]
                    and not any(pid_alive(p) for p in workers), 90, interval_s=0.2,
                    describe=lambda: (httpx.get(f"{cluster['rest']}/taskmanagers").json(),
                                      [p for p in workers if pid_alive(p)]))
    assert len(re.findall(r"Stopping TaskManager \S+: idle for", log_file.read_text())) == 2


@pytest.mark.parametrize("active_cluster", [(
    "resourcemanager.process.python=/nonexistent/python3", "slot.request.timeout=8 s",
    "resourcemanager.start-worker.max-failure-rate=2",
    "resourcemanager.start-worker.retry-interval=2 s")], indirect=True)
def test_task_managers_that_cannot_start_fail_the_job_clearly_without_a_process_storm(
        active_cluster: dict[str, Any], tmp_path: Path) -> None:
    cluster = active_cluster
    program = tmp_path / "job.py"
    program.write_text(PROGRAM)
    proc = run_remote(cluster, str(program), str(tmp_path / "out"), "10", "no-workers")
    assert proc.returncode != 0
    assert "NoResourceAvailableException" in proc.stderr, proc.stderr[-3000:]
    assert "/nonexistent/python3" in proc.stderr, proc.stderr[-3000:]  # the cause, not only "no slots"
    log = next((cluster["state"] / "log").glob("flintlock-jobmanager-*.log")).read_text()
    attempts = log.count("could not be started")
    # two subtasks: two starts, two more (2 failures/min is not above the rate), then one per
    # 2 s until the slot request timeout (8 s) fails the job and its requirement goes away
    assert 5 <= attempts <= 12, log[-3000:]
