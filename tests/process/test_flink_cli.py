"""Apache Flink's own CLI (``bin/flink`` 2.1.1 from PyPI, a JVM talking REST through Flink's ``RestClient``)
lists and cancels jobs of a flintlock session cluster (STYLE layer 4: separate processes, CLI and REST only).

The Java client calls ``/v1/jobs/overview`` and ``PATCH /v1/jobs/<id>?mode=cancel`` with a JSON body ``{}``,
``Content-Type: application/json`` and ``Connection: close``, and deserializes the answers into Flink's own
classes (``MultipleJobsDetails``/``JobDetails``), so this checks the wire format, not just our client."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest
from flink_home import flink_env, flink_home

pytestmark = [pytest.mark.process, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
FLINTLOCK = [sys.executable, "-m", "flintlock"]

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


def _logs(*dirs: Path) -> str:
    return "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for d in dirs if d.exists()
                     for p in sorted(d.glob("*.log")))


@pytest.fixture(scope="module")
def home() -> Path:
    return flink_home()  # before the cluster starts: skips early if PyPI is unreachable


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    state = tmp_path_factory.mktemp("flink-cli-state")
    d = ["-D", f"cluster.state-dir={state}", "-D", "rest.port=0", "-D", "jobmanager.rpc.port=0"]
    try:
        start = subprocess.run([*FLINTLOCK, "cluster", "start", "--taskmanagers", "1", *d],
                               capture_output=True, text=True, timeout=180, cwd=REPO)
        assert start.returncode == 0, f"{start.stdout}\n{start.stderr}\n{_logs(state / 'log')}"
        port = json.loads((state / "jobmanager.port").read_text())["rest_port"]
        yield {"state": state, "address": f"127.0.0.1:{port}", "rest": f"http://127.0.0.1:{port}"}
    finally:
        subprocess.run([*FLINTLOCK, "cluster", "stop", *d], capture_output=True, text=True, timeout=120, cwd=REPO)


def _flink(home: Path, cluster: dict[str, object], *args: str) -> subprocess.CompletedProcess[str]:
    """``$FLINK_HOME/bin/flink <action> -m 127.0.0.1:<rest port> ...`` with the JVM in UTC."""
    action, *rest = args
    env = flink_env(home)
    env["TZ"] = "UTC"
    return subprocess.run([str(home / "bin" / "flink"), action, "-m", str(cluster["address"]), *rest],
                          capture_output=True, text=True, timeout=120, env=env, cwd=REPO)


def _job(cluster: dict[str, object], job_id: str) -> dict:  # type: ignore[type-arg]
    return httpx.get(f"{cluster['rest']}/v1/jobs/{job_id}").json()


def _section(listing: str, title: str) -> str:
    """The lines of one ``flink list`` section (``---- Running/Restarting Jobs ----`` ... ``-------``)."""
    m = re.search(rf"-+ {re.escape(title)} -+\n(.*?)\n-+\n", listing, re.S)
    return m.group(1) if m else ""


def test_flink_cli_lists_and_cancels_a_flintlock_job(home: Path, cluster: dict[str, object],
                                                       tmp_path: Path) -> None:
    version = subprocess.run([str(home / "bin" / "flink"), "--version"], capture_output=True, text=True,
                             timeout=60, env=flink_env(home))
    assert version.returncode == 0 and "Version: 2.1.1" in version.stdout, version.stderr

    prog = tmp_path / "slow.py"
    prog.write_text(SLOW_PROGRAM)
    name = "flink cli conformance"
    submit = subprocess.run([*FLINTLOCK, "run", "--target", "remote", "-d", "-D",
                             f"cluster.state-dir={cluster['state']}", str(prog), str(tmp_path / "out"),
                             "100000", name], capture_output=True, text=True, timeout=180, cwd=REPO)
    assert submit.returncode == 0, submit.stderr[-3000:]
    job_id = submit.stderr.split("JobID")[-1].split()[0]
    assert re.fullmatch(r"[0-9a-f]{32}", job_id), submit.stderr[-3000:]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and _job(cluster, job_id)["state"] != "RUNNING":
        time.sleep(0.2)
    job = _job(cluster, job_id)
    assert job["state"] == "RUNNING", job

    listing = _flink(home, cluster, "list")
    diagnostics = f"{listing.stdout}\n{listing.stderr[-3000:]}\n{_logs(home / 'log', cluster['state'] / 'log')}"  # type: ignore[operator]
    assert listing.returncode == 0, diagnostics
    started = datetime.fromtimestamp(job["start-time"] / 1000, timezone.utc).strftime("%d.%m.%Y %H:%M:%S")
    line = f"{started} : {job_id} : {name} (RUNNING)"
    assert line in _section(listing.stdout, "Running/Restarting Jobs").splitlines(), diagnostics
    assert "No scheduled jobs." in listing.stdout

    cancel = _flink(home, cluster, "cancel", job_id)
    assert cancel.returncode == 0, f"{cancel.stdout}\n{cancel.stderr[-3000:]}"
    assert f"Cancelled job {job_id}." in cancel.stdout
    while time.monotonic() < deadline + 60 and _job(cluster, job_id)["state"] != "CANCELED":
        time.sleep(0.1)
    assert _job(cluster, job_id)["state"] == "CANCELED"

    everything = _flink(home, cluster, "list", "-a")
    assert everything.returncode == 0, everything.stderr[-3000:]
    terminated = _section(everything.stdout, "Terminated Jobs").splitlines()
    assert f"{started} : {job_id} : {name} (CANCELED)" in terminated, everything.stdout
    assert "No running jobs." in everything.stdout

    unknown = "0" * 32
    missing = _flink(home, cluster, "cancel", unknown)
    assert missing.returncode == 1
    assert f"Could not find Flink job ({unknown})" in missing.stdout + missing.stderr
