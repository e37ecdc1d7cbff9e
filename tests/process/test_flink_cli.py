"""Apache Flink's own CLI (``bin/flink`` 2.1.1 from PyPI, a JVM talking REST through Flink's ``RestClient``)
lists and cancels jobs of a flintlock session cluster (STYLE layer 4: separate processes, CLI and REST only).

The Java client calls ``/v1/jobs/overview`` and ``PATCH /v1/jobs/<id>?mode=cancel`` with a JSON body ``{}``,
``Content-Type: application/json`` and ``Connection: close``, and deserializes the answers into Flink's own
classes (``MultipleJobsDetails``/``JobDetails``), so this checks the wire format, not just our client."""

from __future__ import annotations

import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
from cluster_helpers import FLINTLOCK, REPO, SLOW_PROGRAM, job, logs, wait_for_job_state
from flink_home import flink_env, flink_home

pytestmark = [pytest.mark.process, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

@pytest.fixture(scope="module")
def home() -> Path:
    return flink_home()  # skips early if PyPI is unreachable


@pytest.fixture
def cluster(home: Path, session_cluster: dict[str, object]) -> dict[str, object]:
    return session_cluster


def _flink(home: Path, cluster: dict[str, object], *args: str) -> subprocess.CompletedProcess[str]:
    """``$FLINK_HOME/bin/flink <action> -m 127.0.0.1:<rest port> ...`` with the JVM in UTC."""
    action, *rest = args
    env = flink_env(home)
    env["TZ"] = "UTC"
    return subprocess.run([str(home / "bin" / "flink"), action, "-m", str(cluster["address"]), *rest],
                          capture_output=True, text=True, timeout=120, env=env, cwd=REPO)


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
    wait_for_job_state(cluster, job_id, "RUNNING", 120)
    details = job(cluster, job_id)

    listing = _flink(home, cluster, "list")
    diagnostics = f"{listing.stdout}\n{listing.stderr[-3000:]}\n{logs(home / 'log', cluster['state'] / 'log')}"  # type: ignore[operator]
    assert listing.returncode == 0, diagnostics
    started = datetime.fromtimestamp(details["start-time"] / 1000, timezone.utc).strftime("%d.%m.%Y %H:%M:%S")
    line = f"{started} : {job_id} : {name} (RUNNING)"
    assert line in _section(listing.stdout, "Running/Restarting Jobs").splitlines(), diagnostics
    assert "No scheduled jobs." in listing.stdout

    cancel = _flink(home, cluster, "cancel", job_id)
    assert cancel.returncode == 0, f"{cancel.stdout}\n{cancel.stderr[-3000:]}"
    assert f"Cancelled job {job_id}." in cancel.stdout
    wait_for_job_state(cluster, job_id, "CANCELED", 60)

    everything = _flink(home, cluster, "list", "-a")
    assert everything.returncode == 0, everything.stderr[-3000:]
    terminated = _section(everything.stdout, "Terminated Jobs").splitlines()
    assert f"{started} : {job_id} : {name} (CANCELED)" in terminated, everything.stdout
    assert "No running jobs." in everything.stdout

    unknown = "0" * 32
    missing = _flink(home, cluster, "cancel", unknown)
    assert missing.returncode == 1
    assert f"Could not find Flink job ({unknown})" in missing.stdout + missing.stderr
