"""TaskManager loss on a session cluster of separate processes (STYLE layer 4).

SIGKILL ends a TaskManager (its whole process group, Spark JVM included) while a subtask of TPC-H
Q3's lineitem join runs on it; the user's attached ``flintlock run`` prints the failure and the
restart and still ends with DuckDB's answer, exactly once. With partitions on the TaskManagers'
local disks the killed TaskManager's finished partitions that the restarted join reads are
recomputed; with a shared ``shuffle.storage-dir`` they are not. A replacement TaskManager
registers. ``flintlock cancel`` ends a job that waits in RESTARTING at once, leaving no output.
"""

from __future__ import annotations

import datetime
import decimal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

if str(Path(__file__).resolve().parents[2]) not in sys.path:  # benchmarks/, examples/, tests/
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.failover import (
    FLINTLOCK,
    QUERY_PROGRAM,
    REPO,
    SessionCluster,
    submitted_job_id,
)
from examples.tpch import reference
from examples.tpch._common import tpch_path
from flintlock.testing.waiting import wait_until_sync
from tests.examples.compare import assert_same_result

pytestmark = [pytest.mark.process, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

DATA = REPO / "data" / "test"
SETTINGS = {
    "heartbeat.interval": "500 ms",
    "heartbeat.timeout": "3 s",
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "5",
    "restart-strategy.fixed-delay.delay": "1 s",
    # one slot per TaskManager: a job at parallelism 2 then runs its two join subtasks on both
    # TaskManagers at once, so one of them always runs next to a finished producer of the join
    # (with two slots each, slot reuse could put every producer on the TaskManager the join left)
    "taskmanager.numberOfTaskSlots": "1",
}

#: argv: <output dir>; the map always fails at id 7; the job's own strategy: restart after 60 s
ALWAYS_FAILING = """
import sys, time
from flintlock import StreamExecutionEnvironment
from flintlock.api import RestartStrategies
from flintlock.connectors import FileSink

def fail_at_7(row):
    if row.id == 7:
        raise RuntimeError("injected failure at 7")
    time.sleep(0.02)
    return (row.id,)

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 60_000))
env.from_sequence(1, 400).map(fail_at_7, "id long").sink_to(FileSink.parquet(sys.argv[1]))
env.execute("restarts after a minute")
"""




def _cluster(state: Path, extra: dict[str, str] | None = None) -> Iterator[SessionCluster]:
    cluster = SessionCluster(state, {**SETTINGS, **(extra or {})}, task_managers=2)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture
def local_cluster(tmp_path: Path) -> Iterator[SessionCluster]:
    yield from _cluster(tmp_path / "state")


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionCluster]:
    root = tmp_path_factory.mktemp("shared")
    yield from _cluster(root / "state", {"shuffle.storage-dir": str(root / "shuffle")})


@pytest.fixture(scope="module")
def duckdb_q3() -> tuple[list[str], list[tuple[Any, ...]]]:
    con = reference.connect(tpch_path(DATA))
    try:
        return reference.run(con, "q3")
    finally:
        con.close()


def _attached(cluster: SessionCluster, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*FLINTLOCK, "run", "--target", "remote", "-D", f"cluster.state-dir={cluster.state_dir}",
         *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


def _the_job(cluster: SessionCluster, client: subprocess.Popen[str]) -> str:
    def running() -> str | None:
        jobs = cluster.get("/jobs/overview")["jobs"]
        if client.poll() is not None:
            raise AssertionError(f"the client ended early: {client.communicate()}")
        return jobs[-1]["jid"] if jobs and jobs[-1]["state"] == "RUNNING" else None

    return str(wait_until_sync(running, 120, 0.05, lambda: cluster.get("/jobs/overview")))


def _kill_during_the_lineitem_join(cluster: SessionCluster, job_id: str) -> dict[str, Any]:
    """Wait until a subtask of the join reading lineitem runs on a TaskManager where one of the
    join's producers FINISHED; SIGKILL that TaskManager.

    Returns the killed TaskManager, the join's vertex id and the subtasks (vertex id, index) of
    the join's producers that had FINISHED on the killed TaskManager. Placement is the slot
    manager's choice, so the poll looks at every running join subtask, not just the first seen.
    """
    job = cluster.job(job_id)
    nodes = {n["id"]: n for n in job["plan"]["nodes"]}
    names = {v["id"]: v["name"] for v in job["vertices"]}
    (join,) = [n for n in nodes.values() if any(
        names[i["id"]].startswith("Source: lineitem") for i in n.get("inputs", []))]
    producers = [i["id"] for i in join["inputs"]]
    seen: list[Any] = []

    def a_join_next_to_its_producers() -> tuple[str, list[tuple[str, int]]] | None:
        running = {s["taskmanager-id"] for s in
                   cluster.get(f"/jobs/{job_id}/vertices/{join['id']}")["subtasks"]
                   if s["status"] == "RUNNING" and s["taskmanager-id"] != "(unassigned)"}
        finished = [(vid, s["subtask"], s["taskmanager-id"]) for vid in producers
                    for s in cluster.get(f"/jobs/{job_id}/vertices/{vid}")["subtasks"]
                    if s["status"] == "FINISHED"]
        seen[:] = [sorted(running), finished]
        state = cluster.job(job_id)["state"]
        assert state not in ("FINISHED", "FAILED", "CANCELED"), (
            f"the job ended ({state}) before a join subtask ran next to a producer: {seen}")
        for tm in sorted(running):
            there = [(vid, i) for vid, i, at in finished if at == tm]
            if there:
                return tm, there
        return None

    killed, finished_there = wait_until_sync(a_join_next_to_its_producers, 300, 0.02,
                                             lambda: seen)
    cluster.kill_task_manager(killed)
    return {"task_manager": killed, "join": join["id"], "producers_on_killed": finished_there}


def _attempts(cluster: SessionCluster, job_id: str) -> dict[tuple[str, int], int]:
    """(vertex id, subtask index) -> final attempt number."""
    return {(vid, i): a for vid, subtasks in cluster.attempts(job_id).items()
            for i, a in enumerate(subtasks)}


def _check_recovery(cluster: SessionCluster, job_id: str, kill: dict[str, Any], stderr: str,
                    replacement: str, local_storage: bool) -> None:
    assert f"failed on {kill['task_manager']}" in stderr, stderr[-4000:]
    assert "Job RESTARTING" in stderr and "Job RUNNING" in stderr, stderr[-4000:]
    attempts = _attempts(cluster, job_id)
    assert any(a > 0 for a in attempts.values()), attempts
    assert any(a > 0 for (vid, _), a in attempts.items() if vid == kill["join"]), attempts
    rerun = {s: attempts[s] for s in kill["producers_on_killed"]}
    assert kill["producers_on_killed"], "no producer of the join had finished on the killed TM"
    if local_storage:  # their partitions died with the TaskManager: recomputed
        assert all(a > 0 for a in rerun.values()), rerun
    else:  # their partitions survive in the shared directory: not recomputed
        assert all(a == 0 for a in rerun.values()), rerun
    registered = cluster.registered_task_managers()
    assert replacement in registered and kill["task_manager"] not in registered, registered


def test_task_manager_killed_during_q3_with_local_partitions(
        local_cluster: SessionCluster, tmp_path: Path, duckdb_q3) -> None:
    program = tmp_path / "q3_to_parquet.py"
    program.write_text(QUERY_PROGRAM.format(repo=str(REPO)))
    out = tmp_path / "q3"
    client = _attached(local_cluster, str(program), "--query", "q3", "--data", str(DATA),
                       "--parallelism", "2", "--out", str(out), "--name", "q3 local")
    try:
        job_id = _the_job(local_cluster, client)
        kill = _kill_during_the_lineitem_join(local_cluster, job_id)
        replacement = local_cluster.start_task_manager()
        stdout, stderr = client.communicate(timeout=600)
    finally:
        if client.poll() is None:
            client.kill()
    assert client.returncode == 0, f"{stderr[-4000:]}\n{local_cluster.logs()}"
    files = sorted(out.glob("*.parquet"))
    tables = [pq.read_table(f) for f in files]
    rows = [dict(zip(t.column_names, values, strict=True)) for t in tables
            for values in zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True)]
    cols, expected = duckdb_q3
    sort_keys = reference.SORT_KEYS["q3"] if len(files) == 1 else []
    assert_same_result(rows, cols, expected, sort_keys, what="q3 after a TaskManager loss")
    _check_recovery(local_cluster, job_id, kill, stderr, replacement, local_storage=True)


def _printed_rows(stdout: str) -> list[dict[str, Any]]:
    """The ``Row(...)`` lines the example printed (its own output, read back as dicts)."""
    namespace = {"__builtins__": {}, "Row": lambda **kw: kw, "Decimal": decimal.Decimal,
                 "datetime": datetime}
    return [eval(line, namespace) for line in stdout.splitlines() if line.startswith("Row(")]


def test_task_manager_killed_during_q3_with_shared_partitions(
        shared_cluster: SessionCluster, duckdb_q3) -> None:
    client = _attached(shared_cluster, "examples/tpch/q3.py", "--data", str(DATA),
                       "--parallelism", "2")
    try:
        job_id = _the_job(shared_cluster, client)
        kill = _kill_during_the_lineitem_join(shared_cluster, job_id)
        replacement = shared_cluster.start_task_manager()
        stdout, stderr = client.communicate(timeout=600)
    finally:
        if client.poll() is None:
            client.kill()
    assert client.returncode == 0, f"{stderr[-4000:]}\n{shared_cluster.logs()}"
    cols, expected = duckdb_q3
    printed = _printed_rows(stdout)
    assert len(printed) == len(expected) == 10  # the answer, printed once
    assert_same_result(printed, cols, expected, reference.SORT_KEYS["q3"], what="printed q3")
    _check_recovery(shared_cluster, job_id, kill, stderr, replacement, local_storage=False)


def test_cancel_while_restarting_ends_the_job_without_output(
        shared_cluster: SessionCluster, tmp_path: Path) -> None:
    program = tmp_path / "always_failing.py"
    program.write_text(ALWAYS_FAILING)
    out = tmp_path / "out"
    submitted = shared_cluster.submit(program, str(out))
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    job_id = submitted_job_id(submitted.stderr)
    job = shared_cluster.wait_for_state(job_id, {"RESTARTING"}, 120)
    # the job's own strategy (60 s) overrides the cluster's (1 s)
    assert job["numRestarts"] == 1
    assert 50_000 < job["next-restart-time"] - job["now"] <= 60_000
    history = shared_cluster.get(f"/jobs/{job_id}/exceptions")["exceptionHistory"]["entries"]
    assert "injected failure at 7" in history[0]["stacktrace"]
    started = time.monotonic()
    cancel = subprocess.run([*FLINTLOCK, "cancel", job_id, "-D",
                             f"cluster.state-dir={shared_cluster.state_dir}"],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    assert cancel.returncode == 0, cancel.stderr
    shared_cluster.wait_for_state(job_id, {"CANCELED"}, 30)
    assert time.monotonic() - started < 30  # not after the 60 s restart delay
    assert not out.exists() or not any(out.rglob("*.parquet"))
