"""An application cluster with high availability, as a user runs one: ``flintlock run --target
application --jobmanagers 2`` starts two JobManagers; the leader is killed while the second of
three jobs runs; the standby takes over, runs main() again with the same job ids, follows the
job that had finished and the one that was running instead of running them again, and the
command returns the application's status (STYLE layer 4: processes, seen through the CLI, REST
and the output files)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from cluster_helpers import FLINTLOCK, REPO, logs, parquet_ids

from flintlock.runtime.processes import pid_alive
from flintlock.testing.waiting import wait_until_sync

pytestmark = [pytest.mark.process, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

#: argv: <output dir> <gate file>; three jobs one after the other, the second waits for the gate
THREE_JOBS = """
import pathlib, sys, time
from flintlock import StreamExecutionEnvironment
from flintlock.connectors import FileSink

gate = pathlib.Path(sys.argv[2])

def wait_for_gate(row):
    deadline = time.monotonic() + 300
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return (row.id,)

for i in range(3):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    rows = env.from_sequence(1, 10 * (i + 1))
    if i == 1:
        rows = rows.map(wait_for_gate, "id long")
    rows.sink_to(FileSink.parquet(f"{sys.argv[1]}/job-{i}"))
    print(f"job-{i} {env.execute(f'job-{i}').job_id}", flush=True)
print("application done", flush=True)
"""


def _leader(app: Path) -> tuple[int, str] | None:
    """(pid, REST URL) of the live JobManager whose port file says it leads (a killed one's
    port file still says so)."""
    for port_file in sorted(app.glob("jobmanager*.port")):
        try:
            ports = json.loads(port_file.read_text())
            pid = int((app / port_file.name.replace(".port", ".pid")).read_text())
        except (OSError, ValueError):
            continue
        if ports.get("leader") and ports.get("rest_port") and pid_alive(pid):
            return pid, f"http://127.0.0.1:{ports['rest_port']}"
    return None


def _jobs(rest: str) -> dict[str, tuple[str, str]]:
    """Job name -> (id, state) on the cluster at ``rest``; {} when it does not answer."""
    try:
        overview = httpx.get(f"{rest}/jobs/overview", timeout=5).json()["jobs"]
    except (httpx.HTTPError, ValueError, KeyError):
        return {}
    return {j["name"]: (j["jid"], j["state"]) for j in overview}


def test_a_killed_leader_of_an_application_is_replaced_and_no_job_runs_twice(tmp_path: Path) -> None:
    state, out, gate = tmp_path / "state", tmp_path / "out", tmp_path / "gate"
    program = tmp_path / "three_jobs.py"
    program.write_text(THREE_JOBS)
    client = subprocess.Popen(
        [*FLINTLOCK, "run", "--target", "application", "--jobmanagers", "2",
         "-D", f"cluster.state-dir={state}",
         str(program), str(out), str(gate)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    app_dirs = state / "applications"
    try:
        app = wait_until_sync(lambda: next(app_dirs.iterdir(), None) if app_dirs.exists() else None,
                              timeout_s=60)
        seen: dict[str, object] = {}

        def second_job_runs() -> bool:
            leader = _leader(app)
            seen["leader"], seen["jobs"] = leader, _jobs(leader[1]) if leader else {}
            jobs = seen["jobs"]
            return bool(leader) and jobs.get("job-0", ("", ""))[1] == "FINISHED" \
                and jobs.get("job-1", ("", ""))[1] == "RUNNING"

        wait_until_sync(second_job_runs, timeout_s=240, interval_s=0.2,
                        describe=lambda: f"{seen}\n{logs(app / 'log')}")
        first_pid, _ = seen["leader"]  # type: ignore[misc]
        first_ids = {name: jid for name, (jid, _) in seen["jobs"].items()}  # type: ignore[union-attr]
        os.kill(first_pid, signal.SIGKILL)
        wait_until_sync(lambda: (_leader(app) or (first_pid,))[0] != first_pid, timeout_s=60,
                        interval_s=0.2, describe=lambda: logs(app / "log"))
        gate.touch()
        stdout, stderr = client.communicate(timeout=300)
    finally:
        if client.poll() is None:
            client.kill()
    assert client.returncode == 0, f"{stdout}\n{stderr[-3000:]}\n{logs(app / 'log')}"
    assert f"Application {app.name} SUCCEEDED" in stderr
    printed = re.findall(r"^(job-\d) (\w+)$", stdout, re.MULTILINE)
    # the first leader printed job-0; the new leader ran main() again and got job-0's result
    # under the same id, then followed job-1 (still that id) and ran job-2
    assert printed == [("job-0", first_ids["job-0"]), ("job-0", first_ids["job-0"]),
                       ("job-1", first_ids["job-1"]), ("job-2", printed[-1][1])], stdout
    assert stdout.count("application done") == 1
    for i in range(3):  # each job's output once: job-0 was not run again
        assert parquet_ids(out / f"job-{i}") == list(range(1, 10 * (i + 1) + 1))
    # the application's status is recorded for standbys; every JobManager has ended
    record = json.loads(next((state / "applications" / app.name / "ha").rglob(
        "application-status.json")).read_text())
    assert record["status"] == "SUCCEEDED" and len(record["jobs"]) == 3
    job_managers = [int(p.read_text()) for p in app.glob("jobmanager*.pid")]
    task_managers = [int(p) for log in (app / "log").glob("flintlock-jobmanager-*.log")
                     for p in re.findall(r"Started TaskManager process \S+ \(pid (\d+)",
                                         log.read_text())]
    assert len(job_managers) == 2 and len(task_managers) == 2  # one TaskManager per leader
    assert not [p for p in job_managers + task_managers if pid_alive(p)]
