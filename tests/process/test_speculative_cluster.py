"""Speculative execution on a session cluster as a user runs it (issue 15, STYLE layer 4).

``flintlock cluster start`` with one TaskManager, then ``flintlock cluster add-taskmanager`` with
an injected fault that makes its tasks 8x slower (``$internal.fault.task-slowdown``). A batch job
with ``execution.batch.speculative.enabled`` writes 4,000 rows at parallelism 4 with a FileSink:
the two subtasks on the slow TaskManager are found slow, it is blocked (``/overview``
``taskmanagers-blocked``), their speculative attempts win on the other TaskManager, and every
row is in the output exactly once.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_helpers import (
    FLINTLOCK,
    REPO,
    job,
    logs,
    parquet_ids,
    start_cluster,
)

from flintlock.testing.waiting import wait_until_sync

pytestmark = [pytest.mark.process, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

ROWS = 4000
PROGRAM = """
import sys
from flintlock import StreamExecutionEnvironment
from flintlock.connectors import FileSink

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(4)
env.from_sequence(1, int(sys.argv[2])).sink_to(FileSink.parquet(sys.argv[1]))
env.execute("speculative copy")
"""
SPECULATION = ("execution.batch.speculative.enabled=true",
               "execution.batch.adaptive.auto-parallelism.enabled=false",
               "slow-task-detector.check-interval=200 ms",
               "slow-task-detector.execution-time.baseline-lower-bound=0 s",
               "slow-task-detector.execution-time.baseline-ratio=0.5")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[dict[str, Any]]:
    yield from start_cluster(tmp_path / "state", task_managers=1, slots=2)


def test_add_taskmanager_and_speculative_attempts_beat_a_slow_task_manager(
        cluster: dict[str, Any], tmp_path: Path) -> None:
    added = subprocess.run(
        [*FLINTLOCK, "cluster", "add-taskmanager", *cluster["d"],
         "-D", "$internal.fault.task-slowdown=8"],
        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert added.returncode == 0, f"{added.stdout}\n{added.stderr}\n{logs(cluster['state'] / 'log')}"
    assert "taskmanager-1" in added.stdout
    managers = httpx.get(f"{cluster['rest']}/taskmanagers").json()["taskmanagers"]
    assert len(managers) == 2
    program, out = tmp_path / "copy.py", tmp_path / "out"
    program.write_text(PROGRAM)
    flags = [a for option in SPECULATION for a in ("-D", option)]
    seen: dict[str, Any] = {}
    proc = subprocess.Popen(
        [*FLINTLOCK, "run", "--target", "remote", *cluster["client_d"], *flags, str(program),
         str(out), str(ROWS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=REPO)
    try:
        def blocked() -> bool:
            seen["overview"] = httpx.get(f"{cluster['rest']}/overview").json()
            return seen["overview"].get("taskmanagers-blocked") == 1

        wait_until_sync(blocked, 240, interval_s=0.1, describe=lambda: seen)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 0, f"{stdout}\n{stderr[-4000:]}"
    (job_id,) = [j["jid"] for j in httpx.get(f"{cluster['rest']}/jobs/overview").json()["jobs"]
                 if j["name"] == "speculative copy"]
    (vertex,) = job(cluster, job_id)["vertices"]
    details = httpx.get(f"{cluster['rest']}/jobs/{job_id}/vertices/{vertex['id']}").json()
    attempts = sorted(s["attempt"] for s in details["subtasks"])
    assert attempts == [0, 0, 1, 1], details["subtasks"]
    assert len({s["taskmanager-id"] for s in details["subtasks"]}) == 1  # all on the fast one
    assert parquet_ids(out) == list(range(1, ROWS + 1))  # every row once
