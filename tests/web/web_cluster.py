"""What the browser tests and the screenshot script share: Debian's chromium, a session cluster
with a fast-refreshing dashboard, and detached job submission."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "process"))
from cluster_helpers import run_remote, start_cluster
from programs import SLOW_KEYED_PROGRAM

CHROMIUM = Path(os.environ.get("FLINTLOCK_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
#: The dashboard's refresh interval in the tests (the default is 3 s).
REFRESH = "300 ms"


def launch_chromium(playwright: Any) -> Any:
    """Headless Debian chromium (never a downloaded browser)."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                      args=CHROMIUM_ARGS)


def web_cluster_state(state: Path, task_managers: int = 1, refresh: str = REFRESH,
                      flink_dashboard: Path | None = None) -> Iterator[dict[str, Any]]:
    """``flintlock cluster start`` (2 slots per TaskManager) whose dashboard refreshes every
    ``refresh`` (set in a config.yaml) and, given ``flink_dashboard`` (a FLINK_HOME), which also
    serves Apache Flink's dashboard at ``/flink/``; yields cluster_helpers' info plus ``secret``
    and ``flink_dashboard`` (bool)."""
    conf = state / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    lines = [f"web.refresh-interval: {refresh}"]
    if flink_dashboard is not None:
        lines.append(f"web.flink-dashboard.path: {flink_dashboard}")
    (conf / "config.yaml").write_text("\n".join(lines) + "\n")
    previous = os.environ.get("FLINTLOCK_CONF_DIR")
    os.environ["FLINTLOCK_CONF_DIR"] = str(conf)
    try:
        cluster = start_cluster(state / "cluster", task_managers=task_managers)
        info = next(cluster)
    finally:
        if previous is None:
            os.environ.pop("FLINTLOCK_CONF_DIR", None)
        else:
            os.environ["FLINTLOCK_CONF_DIR"] = previous
    info["secret"] = (state / "cluster" / "secret").read_text().strip()
    info["flink_dashboard"] = flink_dashboard is not None
    try:
        yield info
    finally:
        cluster.close()  # runs start_cluster's `cluster stop`


def submit_detached(cluster: dict[str, Any], workdir: Path, name: str, rows: int,
                    fail_at: int | None = None, options: tuple[str, ...] = ()) -> str:
    """``flintlock run -d <options>`` SLOW_KEYED_PROGRAM; returns the JobID."""
    prog = workdir / "slow_keyed.py"
    prog.write_text(SLOW_KEYED_PROGRAM)
    argv = [str(workdir / f"out-{name}"), str(rows), name]
    if fail_at is not None:
        argv.append(str(fail_at))
    return job_id_of(run_remote(cluster, "-d", *options, str(prog), *argv))


def job_id_of(proc: Any) -> str:
    """The JobID ``flintlock run -d`` printed."""
    assert proc.returncode == 0, proc.stderr[-3000:]
    job_id = proc.stderr.split("JobID")[-1].split()[0]
    assert re.fullmatch(r"[0-9a-f]{32}", job_id), proc.stderr[-2000:]
    return str(job_id)
