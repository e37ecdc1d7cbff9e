"""Clusters of their own, as users run them: ``flintlock run --target application`` starts a
JobManager that runs the program's main(); ``--target per-job`` starts one per job. TaskManagers
come and go with the jobs, and nothing is left behind (STYLE layer 4: separate processes, seen
through the CLI, logs and the process table)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from cluster_helpers import FLINTLOCK, REPO, parquet_ids

from flintlock.runtime.processes import pid_alive
from flintlock.testing.waiting import wait_until_sync

pytestmark = [pytest.mark.process, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

#: argv: <output dir> <pause after the first job, s> [<jobs>, default 3]; one after the other
THREE_JOBS = """
import sys, time
from flintlock import StreamExecutionEnvironment
from flintlock.connectors import FileSink

def double(row):
    return (row.id * 2,)

for i in range(int(sys.argv[3]) if len(sys.argv) > 3 else 3):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.from_sequence(1, 100 * (i + 1)).map(double, "id long").sink_to(
        FileSink.parquet(f"{sys.argv[1]}/job-{i}"))
    env.execute(f"job-{i}")
    if i == 0:
        time.sleep(float(sys.argv[2]))  # longer than resourcemanager.taskmanager-timeout
print("application done", flush=True)
"""

#: argv: <output dir>; a job whose map fails on row 7
FAILING = """
import sys
from flintlock import StreamExecutionEnvironment
from flintlock.connectors import FileSink

def check(row):
    if row.id == 7:
        raise ValueError("row 7 is bad")
    return (row.id,)

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
env.from_sequence(1, 20).map(check, "id long").sink_to(FileSink.parquet(sys.argv[1]))
env.execute("fails")
"""


def _application_dir(state: Path) -> Path:
    [directory] = (state / "applications").iterdir()
    return directory


def _run(state: Path, *args: str, timeout: float = 500) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FLINTLOCK, "run", "-D", f"cluster.state-dir={state}", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def _processes_of(app: Path) -> list[int]:
    """The JobManager's pid and the TaskManager pids its log names."""
    log = next((app / "log").glob("flintlock-jobmanager-*.log")).read_text()
    workers = [int(p) for p in re.findall(r"Started TaskManager process \S+ \(pid (\d+)", log)]
    return [int((app / "jobmanager.pid").read_text()), *workers]


def test_an_application_runs_three_jobs_on_task_managers_started_for_it(tmp_path: Path) -> None:
    state, out = tmp_path / "state", tmp_path / "out"
    program = tmp_path / "three_jobs.py"
    program.write_text(THREE_JOBS)
    proc = _run(state, "--target", "application", "-D", "resourcemanager.taskmanager-timeout=2 s",
                str(program), str(out), "6")
    app = _application_dir(state)
    log = next((app / "log").glob("flintlock-jobmanager-*.log")).read_text()
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-3000:]}\n{log[-3000:]}"
    assert "application done" in proc.stdout  # the program's prints reach the user
    assert f"Application {app.name} SUCCEEDED" in proc.stderr
    for i in range(3):
        assert parquet_ids(out / f"job-{i}") == [2 * k for k in range(1, 100 * (i + 1) + 1)]
    # a TaskManager for the first job, stopped while idle during the pause, another for the rest
    assert log.count("Starting TaskManager") == 2, log[-3000:]
    assert "idle for" in log
    pids = _processes_of(app)
    assert len(pids) == 3
    assert not [p for p in pids if pid_alive(p)]  # the JobManager and its TaskManagers ended


def test_a_detached_application_whose_job_fails_ends_with_the_root_cause(tmp_path: Path) -> None:
    state = tmp_path / "state"
    program = tmp_path / "failing.py"
    program.write_text(FAILING)
    proc = _run(state, "--target", "application", "-d", "-D", "restart-strategy.type=none",
                str(program), str(tmp_path / "out"), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]  # returns once the JobManager serves
    app = _application_dir(state)
    assert re.search(rf"Application {app.name} of failing.py: REST http://127.0.0.1:\d+", proc.stderr)
    jm_pid = int((app / "jobmanager.pid").read_text())
    wait_until_sync(lambda: not pid_alive(jm_pid), 300, interval_s=0.2,
                    describe=lambda: (app / "log" / "jobmanager.out").read_text()[-2000:])
    output = (app / "log" / "jobmanager.out").read_text()
    assert "row 7 is bad" in output, output[-3000:]  # the root cause, in the application's output
    log = next((app / "log").glob("flintlock-jobmanager-*.log")).read_text()
    assert re.search(r"Application FAILED \(\w{32} FAILED\)", log), log[-3000:]
    assert not [p for p in _processes_of(app) if pid_alive(p)]


def test_per_job_clusters_run_each_job_of_a_program_on_a_cluster_of_its_own(tmp_path: Path) -> None:
    state, out = tmp_path / "state", tmp_path / "out"
    program = tmp_path / "jobs.py"
    program.write_text(THREE_JOBS)
    proc = _run(state, "--target", "per-job", str(program), str(out), "0", "2")
    clusters = sorted((state / "job-clusters").iterdir(), key=lambda p: p.stat().st_mtime)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-3000:]}"
    assert "application done" in proc.stdout  # main() ran in the client
    assert len(clusters) == 2 and proc.stderr.count("Per-job cluster for job-") == 2
    for i in range(2):
        assert parquet_ids(out / f"job-{i}") == [2 * k for k in range(1, 100 * (i + 1) + 1)]
    for cluster in clusters:
        log = next((cluster / "log").glob("flintlock-jobmanager-*.log")).read_text()
        assert log.count("Starting TaskManager") == 1, log[-3000:]
    # each cluster ends once its client fetched the result (the last one just now)
    pids = [p for cluster in clusters for p in _processes_of(cluster)]
    assert len(pids) == 4
    wait_until_sync(lambda: not [p for p in pids if pid_alive(p)], 60, interval_s=0.2,
                    describe=lambda: [p for p in pids if pid_alive(p)])


def test_a_per_job_cluster_whose_job_fails_ends_and_the_client_shows_the_root_cause(
        tmp_path: Path) -> None:
    state = tmp_path / "state"
    program = tmp_path / "failing.py"
    program.write_text(FAILING)
    proc = _run(state, "--target", "per-job", "-D", "restart-strategy.type=none", str(program),
                str(tmp_path / "out"), timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "row 7 is bad" in proc.stderr, proc.stderr[-3000:]
    [cluster] = (state / "job-clusters").iterdir()
    wait_until_sync(lambda: not [p for p in _processes_of(cluster) if pid_alive(p)], 60,
                    interval_s=0.2, describe=lambda: _processes_of(cluster))
    log = next((cluster / "log").glob("flintlock-jobmanager-*.log")).read_text()
    assert re.search(r"The per-job cluster's job \w{32} ended FAILED", log), log[-3000:]
