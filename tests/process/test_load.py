"""A session cluster under load keeps its heartbeats: the load issue's scenario, end to end.

2 TaskManagers x 4 slots on this 2-core machine, ``heartbeat.timeout`` 10 s (and nothing else
about heartbeats): TPC-H Q18 at SF 1 written to a FileSink at parallelism 4 (12 subtasks at once
with slot sharing), then 50 small jobs submitted at once. Every process's event-loop lag is
polled from REST throughout (``Status.Python.EventLoop.*``, a 60 s window polled every second,
so every tick is seen); the design bound is p99 < 200 ms in every process. The job must finish
without a restart and with DuckDB's answer, and no heartbeat may time out.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from cluster_helpers import REPO, job, logs, run_remote, start_cluster

from examples.data import generate_tpch
from examples.tpch import reference
from tests.examples.compare import assert_same_result

pytestmark = [pytest.mark.process, pytest.mark.slow, pytest.mark.timeout(900)]

#: the design bound of ARCHITECTURE.md section 3 (ms)
P99_BOUND_MS = 200.0
_LAG = "Status.Python.EventLoop.LagP99Ms,Status.Python.EventLoop.LagMaxMs"

Q18_TO_FILE_SINK = """
import sys
sys.path.insert(0, {repo!r})
from flintlock import StreamExecutionEnvironment
from flintlock.connectors import FileSink
from examples.tpch import q18

env = StreamExecutionEnvironment.get_execution_environment()
q18.build(env, sys.argv[1]).sink_to(FileSink.parquet(sys.argv[2]))
env.execute("Q18 under load")
"""

SMALL_JOBS = """
import sys
from pyspark.sql import functions as F
from flintlock import RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.connectors import FileSink

clients = []
for i in range(int(sys.argv[1])):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(1)
    (env.from_sequence(1, 1000).select((F.col("id") % 10).alias("k"), "id").key_by("k")
     .agg(F.count(F.lit(1)).alias("n"), F.sum("id").alias("s"))
     .sink_to(FileSink.parquet(f"{sys.argv[2]}/{i}")))
    clients.append(env.execute_async(f"small job {i}"))
for client in clients:
    client.get_job_execution_result()
"""


class LagPoller:
    """Polls every process's loop lag once a second; keeps the worst values seen per process."""

    def __init__(self, rest: str) -> None:
        self.rest = rest
        self.worst: dict[str, dict[str, float]] = {}
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-poller", daemon=True)

    def __enter__(self) -> LagPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.poll()  # the last window, after the work

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.poll()

    def poll(self) -> None:
        with httpx.Client(base_url=self.rest, timeout=10) as http:
            urls = {"jobmanager": f"/jobmanager/metrics?get={_LAG}"}
            for tm in http.get("/taskmanagers").json()["taskmanagers"]:
                urls[f"taskmanager {tm['id']}"] = f"/taskmanagers/{tm['id']}/metrics?get={_LAG}"
            for who, url in urls.items():
                worst = self.worst.setdefault(who, {})
                for metric in http.get(url).json():
                    name = metric["id"].rsplit(".", 1)[1]
                    worst[name] = max(worst.get(name, 0.0), float(metric["value"]))
        self.polls += 1


@pytest.fixture(scope="module")
def loaded_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    yield from start_cluster(tmp_path_factory.mktemp("load-cluster"), task_managers=2, slots=4,
                             options=("heartbeat.timeout=10000",))


@pytest.fixture(scope="module")
def sf1() -> Path:
    return generate_tpch(REPO / "data", 1, quiet=True)


def _job_ids(cluster: dict[str, Any]) -> list[str]:
    return [j["jid"] for j in httpx.get(f"{cluster['rest']}/v1/jobs/overview").json()["jobs"]]


def test_q18_at_sf1_on_oversubscribed_slots_and_50_concurrent_jobs_keep_heartbeats(
        loaded_cluster: dict[str, Any], sf1: Path, tmp_path: Path) -> None:
    cluster = loaded_cluster
    program = tmp_path / "q18_sink.py"
    program.write_text(Q18_TO_FILE_SINK.format(repo=str(REPO)))
    small = tmp_path / "small_jobs.py"
    small.write_text(SMALL_JOBS)
    out = tmp_path / "q18"

    with LagPoller(cluster["rest"]) as poller:
        q18 = run_remote(cluster, "-p", "4", str(program), str(sf1), str(out), timeout=600)
        q18_ids = _job_ids(cluster)
        jobs = run_remote(cluster, str(small), "50", str(tmp_path / "small"), timeout=600)
    log_text = logs(cluster["state"] / "log")
    assert q18.returncode == 0, f"{q18.stdout}\n{q18.stderr}\n{log_text}"
    assert jobs.returncode == 0, f"{jobs.stdout}\n{jobs.stderr}\n{log_text}"

    # Q18 ran once, with no failover, and wrote DuckDB's answer
    (q18_id,) = q18_ids
    details = job(cluster, q18_id)
    assert details["state"] == "FINISHED" and details["numRestarts"] == 0, details
    # -p 4 on 2 x 4 slots, but the two TaskManagers' Spark servers have one core each: the
    # automatically sized vertices (all of Q18's) got at most 2 subtasks, not 4
    parallelism = {v["name"]: v["parallelism"] for v in details["vertices"]}
    assert max(parallelism.values()) == 2, parallelism
    con = reference.connect(sf1)
    try:
        cols, expected = reference.run(con, "q18")
    finally:
        con.close()
    written = duckdb.sql(f"SELECT * FROM read_parquet('{out}/**/*.parquet')")
    rows = [dict(zip(written.columns, r, strict=True)) for r in written.fetchall()]
    assert len(expected) == 57
    assert_same_result(rows, cols, expected, what="q18 at SF1 under load")

    # all 51 jobs finished; nobody lost a heartbeat
    states = [j["state"] for j in httpx.get(f"{cluster['rest']}/v1/jobs/overview").json()["jobs"]]
    assert states.count("FINISHED") == 51, states
    timeouts = [line for f in sorted((cluster["state"] / "log").glob("*.log"))
                for line in f.read_text(errors="replace").splitlines() if "timed out" in line]
    assert not timeouts, "\n".join(timeouts)

    # every process answered its heartbeats and RPC promptly all along
    assert len(poller.worst) == 3 and poller.polls >= 10, poller.worst
    over = {who: v for who, v in poller.worst.items() if v["LagP99Ms"] >= P99_BOUND_MS}
    assert not over, f"event-loop lag p99 over {P99_BOUND_MS} ms: {json.dumps(poller.worst)}"
