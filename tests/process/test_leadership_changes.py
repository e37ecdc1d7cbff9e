"""Leadership changes 20 times in a row while small jobs keep being submitted: no accepted job is
lost and none runs twice (FILE high availability; a killed leader is replaced by a standby, and
``flintlock cluster add-jobmanager`` starts the next standby).

Each job writes the ids 1..n with a FileSink: an accepted job (its client got a JobID) must end
FINISHED on the last leader with exactly those ids, once. A submission that failed because the
leader died under it is not counted as accepted; if its job ran anyway, its output must still be
exact.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from flintlock.runtime.highavailability.file_services import read_leader
from flintlock.runtime.processes import pid_alive
from flintlock.testing.waiting import wait_until_sync
from tests.process.cluster_helpers import FLINTLOCK, REPO, leader_pid, logs, parquet_ids

pytestmark = [pytest.mark.spark, pytest.mark.process]

CHANGES = 20

SMALL_PROGRAM = """
import sys
from flintlock import StreamExecutionEnvironment
from flintlock.connectors import FileSink

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
env.from_sequence(1, int(sys.argv[2])).sink_to(FileSink.parquet(sys.argv[1]))
env.execute(sys.argv[3])
"""


def _jobs(ha_dir: Path) -> dict[str, str]:
    leader = read_leader(ha_dir)
    if leader is None:
        return {}
    try:
        rows = httpx.get(f"{leader.addresses['rest']}/v1/jobs/overview", timeout=5).json()["jobs"]
    except (httpx.HTTPError, ValueError, KeyError):
        return {}
    return {r["name"]: r["state"] for r in rows}


@pytest.mark.timeout(900)
def test_twenty_leadership_changes_under_a_stream_of_jobs(tmp_path: Path) -> None:
    state, ha_dir = tmp_path / "cluster", tmp_path / "cluster" / "ha" / "default"
    d = ["-D", f"cluster.state-dir={state}", "-D", "rest.port=0",
         "-D", "taskmanager.numberOfTaskSlots=2", "-D", "heartbeat.interval=500 ms",
         "-D", "heartbeat.timeout=5 s"]
    program = tmp_path / "small.py"
    program.write_text(SMALL_PROGRAM)
    accepted: dict[str, Path] = {}
    refused: dict[str, Path] = {}
    stop = threading.Event()

    def submit_jobs() -> None:
        n = 0
        while not stop.is_set():
            name, out = f"job-{n}", tmp_path / f"out-{n}"
            run = subprocess.run([*FLINTLOCK, "run", "--target", "remote", "--detached",
                                  "-D", f"cluster.state-dir={state}", str(program), str(out),
                                  "40", name], capture_output=True, text=True, timeout=120,
                                 cwd=REPO)
            (accepted if run.returncode == 0 else refused)[name] = out
            n += 1

    start = subprocess.run([*FLINTLOCK, "cluster", "start", "--jobmanagers", "2",
                            "--taskmanagers", "1", *d], capture_output=True, text=True,
                           timeout=300, cwd=REPO)
    try:
        assert start.returncode == 0, f"{start.stdout}\n{start.stderr}\n{logs(state / 'log')}"
        submitter = threading.Thread(target=submit_jobs, name="submitter")
        submitter.start()
        sessions = []
        try:
            for change in range(CHANGES):
                wait_until_sync(lambda c=change: len(accepted) > c // 2, 120, interval_s=0.1,
                                describe=lambda: f"accepted {sorted(accepted)}")
                old = read_leader(ha_dir)
                assert old is not None
                killed = leader_pid(state)
                os.kill(killed, signal.SIGKILL)
                sessions.append(old.session_id)
                wait_until_sync(lambda o=old: (lead := read_leader(ha_dir)) is not None
                                and lead.session_id != o.session_id, 60, interval_s=0.05,
                                describe=lambda: read_leader(ha_dir))
                assert not pid_alive(killed)
                add = subprocess.run([*FLINTLOCK, "cluster", "add-jobmanager", *d],
                                     capture_output=True, text=True, timeout=120, cwd=REPO)
                assert add.returncode == 0, add.stdout + add.stderr
        finally:
            stop.set()
            submitter.join(180)
        assert len(set(sessions)) == CHANGES
        seen: dict[str, Any] = {}

        def all_finished() -> bool:
            seen.update(_jobs(ha_dir))
            return all(seen.get(name) == "FINISHED" for name in accepted)

        wait_until_sync(all_finished, 300, interval_s=0.5, describe=lambda: (
            f"{ {n: seen.get(n) for n in accepted} }\n{logs(state / 'log')}"))
        for name, out in accepted.items():
            assert parquet_ids(out) == list(range(1, 41)), name  # once, complete
        for name, out in refused.items():  # if it ran anyway, exactly once too
            assert parquet_ids(out) in ([], list(range(1, 41))), name
        print(f"{CHANGES} leadership changes; {len(accepted)} jobs accepted, all finished once; "
              f"{len(refused)} submissions refused during a change")
    finally:
        subprocess.run([*FLINTLOCK, "cluster", "stop", *d], capture_output=True, text=True,
                       timeout=120, cwd=REPO)
