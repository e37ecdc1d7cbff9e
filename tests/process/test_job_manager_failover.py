"""JobManager high availability on one host (``high-availability.type: FILE``): a session cluster
of two JobManagers and one TaskManager, started by ``flintlock cluster start --jobmanagers 2``.

The leader is killed with SIGKILL while a batch job runs: the standby takes over, the
TaskManager registers with it, and the job runs again to its exact output (every row once in the
committed files). A job that finished before the kill is listed by the new leader and not run
again. Clients find the leader through the cluster's state directory.

A checkpointed STREAMING job (keyed running counts into a FileSink) whose leader is killed after
a checkpoint completed resumes on the new leader from that checkpoint: its output over both
leaders is every ``(key, 1..n)`` exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

from flintlock.runtime.highavailability.file_services import read_leader
from flintlock.testing.waiting import wait_until_sync
from tests.process.cluster_helpers import (
    FLINTLOCK,
    REPO,
    SLOW_PROGRAM,
    leader_pid,
    logs,
    parquet_ids,
)

pytestmark = [pytest.mark.spark, pytest.mark.process]


@pytest.fixture
def ha_cluster(tmp_path: Path) -> Iterator[dict[str, Any]]:
    yield from _ha_cluster(tmp_path)


@pytest.fixture
def recovering_ha_cluster(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """With batch job recovery: partitions on shared storage, finished subtasks recorded."""
    yield from _ha_cluster(tmp_path, "-D", f"shuffle.storage-dir={tmp_path / 'shuffle'}",
                           "-D", "execution.batch.job-recovery.enabled=true")


def _ha_cluster(tmp_path: Path, *options: str) -> Iterator[dict[str, Any]]:
    state = tmp_path / "cluster"
    d = ["-D", f"cluster.state-dir={state}", "-D", "rest.port=0",
         "-D", "taskmanager.numberOfTaskSlots=2", "-D", "heartbeat.interval=500 ms",
         "-D", "heartbeat.timeout=5 s", *options]
    try:
        start = subprocess.run([*FLINTLOCK, "cluster", "start", "--jobmanagers", "2",
                                "--taskmanagers", "1", *d], capture_output=True, text=True,
                               timeout=300, cwd=REPO)
        assert start.returncode == 0, f"{start.stdout}\n{start.stderr}\n{logs(state / 'log')}"
        assert "2 JobManagers (one leads)" in start.stdout, start.stdout
        yield {"state": state, "ha": state / "ha" / "default", "d": d,
               "client_d": ["-D", f"cluster.state-dir={state}"]}
    finally:
        subprocess.run([*FLINTLOCK, "cluster", "stop", *d], capture_output=True, text=True,
                       timeout=120, cwd=REPO)


def _rest(cluster: dict[str, Any]) -> str:
    leader = read_leader(cluster["ha"])
    assert leader is not None, "no leader"
    return leader.addresses["rest"]


def _jobs(cluster: dict[str, Any]) -> dict[str, str]:
    """job name -> state, as the current leader lists them (empty while none answers)."""
    try:
        rows = httpx.get(f"{_rest(cluster)}/v1/jobs/overview", timeout=5).json()["jobs"]
    except (httpx.HTTPError, AssertionError):
        return {}
    return {r["name"]: r["state"] for r in rows}


@pytest.mark.timeout(600)
def test_a_killed_leader_is_replaced_and_its_running_job_finishes_exactly_once(
        ha_cluster: dict[str, Any], tmp_path: Path) -> None:
    cluster = ha_cluster
    program = tmp_path / "slow.py"
    program.write_text(SLOW_PROGRAM)
    done_out, slow_out = tmp_path / "done", tmp_path / "slow"
    first = subprocess.run([*FLINTLOCK, "run", "--target", "remote", *cluster["client_d"],
                            str(program), str(done_out), "50", "done before the kill"],
                           capture_output=True, text=True, timeout=300, cwd=REPO)
    assert first.returncode == 0, f"{first.stdout}\n{first.stderr}"
    assert parquet_ids(done_out) == list(range(1, 51))
    done_files = sorted(p.name for p in done_out.iterdir())

    old = read_leader(cluster["ha"])
    view = httpx.get(f"{_rest(cluster)}/v1/jobmanager/high-availability", timeout=5).json()
    assert view["type"] == "FILE" and view["leader"]["session-id"] == old.session_id, view
    assert sorted(j["role"] for j in view["jobmanagers"]) == ["leader", "standby"], view
    running = subprocess.Popen([*FLINTLOCK, "run", "--target", "remote", "--detached",
                                *cluster["client_d"], str(program), str(slow_out), "600",
                                "running at the kill"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, cwd=REPO)
    assert running.wait(120) == 0, running.stdout.read() if running.stdout else ""
    wait_until_sync(lambda: _jobs(cluster).get("running at the kill") == "RUNNING", 120,
                    interval_s=0.2, describe=lambda: _jobs(cluster))
    killed_at, killed_ms = time.monotonic(), int(time.time() * 1000)
    os.kill(leader_pid(cluster["state"]), signal.SIGKILL)

    def new_leader() -> bool:
        leader = read_leader(cluster["ha"])
        return leader is not None and old is not None and leader.session_id != old.session_id

    wait_until_sync(new_leader, 60, interval_s=0.1, describe=lambda: read_leader(cluster["ha"]))
    took_over_s = time.monotonic() - killed_at
    wait_until_sync(lambda: _jobs(cluster).get("running at the kill") == "FINISHED", 240,
                    interval_s=0.5, describe=lambda: f"{_jobs(cluster)}\n"
                    f"{logs(cluster['state'] / 'log')}")
    finished_s = time.monotonic() - killed_at
    assert parquet_ids(slow_out) == list(range(1, 601))  # every row once, nothing of the killed run
    rows = httpx.get(f"{_rest(cluster)}/v1/jobs/overview", timeout=5).json()["jobs"]
    (rerun,) = [r for r in rows if r["name"] == "running at the kill"]
    assert rerun["start-time"] >= killed_ms, rerun  # run again by the new leader
    details = httpx.get(f"{_rest(cluster)}/v1/jobs/{rerun['jid']}", timeout=5).json()
    assert details["recoveries"] == 1, details
    view = httpx.get(f"{_rest(cluster)}/v1/jobmanager/high-availability", timeout=5).json()
    assert [j["role"] for j in view["jobmanagers"]] == ["leader"], view  # the killed one is gone
    jobs = _jobs(cluster)
    assert jobs == {"done before the kill": "FINISHED", "running at the kill": "FINISHED"}, jobs
    assert sorted(p.name for p in done_out.iterdir()) == done_files  # not run again
    listed = subprocess.run([*FLINTLOCK, "list", "-a", *cluster["client_d"]], capture_output=True,
                            text=True, timeout=60, cwd=REPO)
    assert "running at the kill" in listed.stdout, listed.stdout + listed.stderr
    print(f"new leader {took_over_s:.1f} s after the kill; job finished {finished_s:.1f} s "
          "after it")


#: argv: <output dir> <rows> <job name>; two stages: the sources, then a slow map into the sink
TWO_STAGE_PROGRAM = """
import sys, time
from flintlock import Configuration, StreamExecutionEnvironment
from flintlock.connectors import FileSink

def slow(row):
    time.sleep(0.02)
    return (row.id,)

# two source subtasks, still sized by the scheduler: without the key, the cluster's one Spark
# server would bound the source to one
env = StreamExecutionEnvironment.get_execution_environment(Configuration({
    "execution.batch.adaptive.auto-parallelism.default-source-parallelism": 2}))
env.set_parallelism(2)
(env.from_sequence(1, int(sys.argv[2])).rebalance().map(slow, "id long")
 .sink_to(FileSink.parquet(sys.argv[1])))
env.execute(sys.argv[3])
"""


@pytest.mark.timeout(600)
def test_batch_job_recovery_keeps_the_finished_stage(recovering_ha_cluster: dict[str, Any],
                                                      tmp_path: Path) -> None:
    """The leader is killed while the second stage runs: the new leader keeps the two finished
    source subtasks (their partitions are on shared storage) and runs only the second stage."""
    cluster = recovering_ha_cluster
    program, out = tmp_path / "two_stages.py", tmp_path / "out"
    program.write_text(TWO_STAGE_PROGRAM)
    submit = subprocess.run([*FLINTLOCK, "run", "--target", "remote", "--detached",
                             *cluster["client_d"], str(program), str(out), "600", "two stages"],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    assert submit.returncode == 0, submit.stdout + submit.stderr

    def stages() -> list[str]:
        try:
            (job,) = [r for r in httpx.get(f"{_rest(cluster)}/v1/jobs/overview", timeout=5)
                      .json()["jobs"] if r["name"] == "two stages"]
            details = httpx.get(f"{_rest(cluster)}/v1/jobs/{job['jid']}", timeout=5).json()
        except (httpx.HTTPError, AssertionError, ValueError):
            return []
        return [v["status"] for v in details["vertices"]]

    wait_until_sync(lambda: stages() == ["FINISHED", "RUNNING"], 120, interval_s=0.1,
                    describe=stages)
    os.kill(leader_pid(cluster["state"]), signal.SIGKILL)
    wait_until_sync(lambda: _jobs(cluster).get("two stages") == "FINISHED", 240,
                    interval_s=0.5, describe=lambda: f"{_jobs(cluster)}\n"
                    f"{logs(cluster['state'] / 'log')}")
    assert parquet_ids(out) == list(range(1, 601))  # every row once
    job_managers = "".join(p.read_text(errors="replace")
                           for p in (cluster["state"] / "log").glob("flintlock-jobmanager-*.log"))
    assert "batch job recovery keeps 2 of its 3 subtasks" in job_managers, job_managers[-3000:]
    # the AdaptiveBatchScheduler decided 2 sources and 1 map subtask; the new leader rebuilt both
    assert "batch job recovery rebuilt 2 vertices as an earlier leader decided" in job_managers
    # the restored partitions (no TaskManager tracks them now) are deleted with the job's end
    left = lambda: sorted(str(p) for p in (tmp_path / "shuffle").glob("*/*/*"))  # noqa: E731
    wait_until_sync(lambda: left() == [], 30, interval_s=0.2, describe=left)
    print("the new leader ran 1 of the job's 3 subtasks again")


#: argv: <output dir> <rows> <rows per second> <job name>
STREAMING_PROGRAM = """
import sys
from flintlock import RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.connectors import DataGeneratorSource, FileSink, RateLimiterStrategy
from flintlock.testing.state_functions import RunningCount

def event(i):
    return (i, f"k{i % 3}")

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
env.enable_checkpointing(1000)
source = DataGeneratorSource(event, int(sys.argv[2]), RateLimiterStrategy.per_second(
    int(sys.argv[3])), "id long, k string")
(env.from_source(source).set_parallelism(1).uid("events")
 .key_by("k").process(RunningCount(), "k string, n long").uid("counts")
 .sink_to(FileSink.parquet(sys.argv[1])))
env.execute(sys.argv[4])
"""


@pytest.mark.timeout(600)
def test_a_streaming_job_resumes_from_its_checkpoint_on_the_new_leader(
        ha_cluster: dict[str, Any], tmp_path: Path) -> None:
    cluster, rows = ha_cluster, 3000
    program, out = tmp_path / "counts.py", tmp_path / "counts"
    program.write_text(STREAMING_PROGRAM)
    submit = subprocess.run([*FLINTLOCK, "run", "--target", "remote", "--detached",
                             *cluster["client_d"], str(program), str(out), str(rows), "150",
                             "counts"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert submit.returncode == 0, submit.stdout + submit.stderr
    checkpoints = cluster["ha"] / "checkpoints"
    # killed once a checkpoint completed and published output, while rows are still coming
    wait_until_sync(lambda: any(checkpoints.glob("*/chk-*/_metadata")) and any(
        p.suffix == ".parquet" for p in out.glob("*")), 120, interval_s=0.2,
        describe=lambda: f"{_jobs(cluster)} {list(checkpoints.glob('*/*'))}")
    published = len([p for p in out.glob("*.parquet")])
    os.kill(leader_pid(cluster["state"]), signal.SIGKILL)
    wait_until_sync(lambda: _jobs(cluster).get("counts") == "FINISHED", 240, interval_s=0.5,
                    describe=lambda: f"{_jobs(cluster)}\n{logs(cluster['state'] / 'log')}")
    counts = sorted((r["k"], r["n"]) for r in pq.read_table(out).to_pylist())
    expected = sorted((f"k{k}", n) for k in range(3) for n in range(1, rows // 3 + 1))
    assert counts == expected  # nothing lost, nothing published twice
    (job,) = [r for r in httpx.get(f"{_rest(cluster)}/v1/jobs/overview", timeout=5)
              .json()["jobs"] if r["name"] == "counts"]
    stats = httpx.get(f"{_rest(cluster)}/v1/jobs/{job['jid']}/checkpoints", timeout=5).json()
    assert stats["counts"]["restored"] == 1, stats["counts"]  # resumed, not started over
    assert published > 0
