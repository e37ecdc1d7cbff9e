"""Shared pieces of the process tests: how to start, use and read a standalone session cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from flintlock.runtime.processes import pid_alive
from flintlock.testing.waiting import wait_until_sync

REPO = Path(__file__).resolve().parents[2]
FLINTLOCK = [sys.executable, "-m", "flintlock"]

#: argv: <output dir> <rows> <job name>; one slow Python map per row, written by a FileSink
SLOW_PROGRAM = """
import sys, time
from flintlock import StreamExecutionEnvironment
from flintlock.connectors import FileSink

def slow(row):
    time.sleep(0.02)
    return (row.id,)

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
env.from_sequence(1, int(sys.argv[2])).map(slow, "id long").sink_to(FileSink.parquet(sys.argv[1]))
env.execute(sys.argv[3])
"""


def logs(*dirs: Path) -> str:
    return "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for d in dirs if d.exists()
                     for p in sorted(d.glob("*.log")))


def start_cluster(state: Path, task_managers: int, slots: int = 2,
                  options: tuple[str, ...] = ()) -> Iterator[dict[str, Any]]:
    """``flintlock cluster start`` on ephemeral ports; yields how to reach it; stops it after.

    ``options`` are more ``key=value`` settings for every process.
    """
    d = ["-D", f"cluster.state-dir={state}", "-D", "rest.port=0", "-D", "jobmanager.rpc.port=0",
         "-D", f"taskmanager.numberOfTaskSlots={slots}",
         # every process serves Prometheus on a free port (``metrics_port`` in its port file)
         "-D", "metrics.reporter.prom.port=0"]
    d += [arg for option in options for arg in ("-D", option)]
    try:
        start = subprocess.run([*FLINTLOCK, "cluster", "start", "--taskmanagers", str(task_managers),
                                *d], capture_output=True, text=True, timeout=300, cwd=REPO)
        assert start.returncode == 0, f"{start.stdout}\n{start.stderr}\n{logs(state / 'log')}"
        port = json.loads((state / "jobmanager.port").read_text())["rest_port"]
        yield {
            "state": state, "address": f"127.0.0.1:{port}", "rest": f"http://127.0.0.1:{port}",
            "pids": [int(p.read_text()) for p in state.glob("*.pid")], "d": d,
            "client_d": ["-D", f"cluster.state-dir={state}"],
        }
    finally:
        subprocess.run([*FLINTLOCK, "cluster", "stop", *d], capture_output=True, text=True,
                       timeout=120, cwd=REPO)


def run_remote(cluster: dict[str, Any], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``flintlock run --target remote -D cluster.state-dir=... <args>``."""
    return subprocess.run([*FLINTLOCK, "run", "--target", "remote", *cluster["client_d"], *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def job(cluster: dict[str, Any], job_id: str) -> dict[str, Any]:
    return dict(httpx.get(f"{cluster['rest']}/v1/jobs/{job_id}").json())


_TERMINAL = ("FINISHED", "FAILED", "CANCELED")


def wait_for_job_state(cluster: dict[str, Any], job_id: str, state: str, timeout_s: float) -> None:
    """Poll until the job is in ``state``; fails at once, with the job's root exception, when it
    ended in another state."""
    def reached() -> bool:
        now = job(cluster, job_id)["state"]
        if now in _TERMINAL and now != state:
            exceptions = httpx.get(f"{cluster['rest']}/v1/jobs/{job_id}/exceptions").json()
            raise AssertionError(f"job {job_id} ended {now}, not {state}: "
                                 f"{str(exceptions.get('root-exception'))[:3000]}")
        return bool(now == state)

    wait_until_sync(reached, timeout_s, interval_s=0.1,
                    describe=lambda: job(cluster, job_id)["state"])


def leader_pid(state: Path) -> int:
    """The pid of the live JobManager whose port file (under ``state``) says it leads (a
    killed one's file stays behind)."""
    for port_file in state.glob("jobmanager*.port"):
        data = json.loads(port_file.read_text())
        if data.get("leader") and pid_alive(int(data["pid"])):
            return int(data["pid"])
    raise AssertionError("no JobManager port file says it leads")


def leads(state: Path, pid: int) -> bool:
    """Whether JobManager ``pid`` says (in its port file under ``state``) that it leads."""
    for port_file in state.glob("jobmanager*.port"):
        data = json.loads(port_file.read_text())
        if data.get("pid") == pid:
            return bool(data.get("leader"))
    return False


def parquet_ids(out: Path) -> list[int]:
    """The sorted ``id`` column of the Parquet files under ``out`` ([] when there are none)."""
    import pyarrow.parquet as pq

    return sorted(r["id"] for r in pq.read_table(out).to_pylist()) if out.exists() else []
