"""Screenshots of every dashboard page for the README (``docs/images/web-*.png``).

Starts a session cluster (1 TaskManager x 2 slots), runs TPC-H Q3 on ``data/test``, a job that
fails, and a long job (checkpointing every 2 s), uploads a program, then captures each page with
Debian's chromium and stops the cluster::

    python -m tests.web.screenshots [--out docs/images] [--data data/test]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "process")]  # as pytest sees tests/web and tests/process
from cluster_helpers import REPO, run_remote, wait_for_job_state  # noqa: E402
from programs import SLOW_KEYED_PROGRAM  # noqa: E402
from web_cluster import CHROMIUM, launch_chromium, submit_detached, web_cluster_state  # noqa: E402

VIEWPORT = {"width": 1400, "height": 900}


def _jobs(cluster: dict[str, Any]) -> list[dict[str, Any]]:
    return list(httpx.get(f"{cluster['rest']}/jobs/overview").json()["jobs"])


def _prepare(cluster: dict[str, Any], work: Path, data: Path) -> dict[str, str]:
    """Run the jobs the pages show; returns their ids."""
    before = {j["jid"] for j in _jobs(cluster)}
    q3 = run_remote(cluster, str(REPO / "examples" / "tpch" / "q3.py"), "--data", str(data))
    assert q3.returncode == 0, q3.stderr[-3000:]
    (q3_id,) = [j["jid"] for j in _jobs(cluster) if j["jid"] not in before]
    failed = submit_detached(cluster, work, "failing-job", 60, fail_at=30,
                             options=("-D", "restart-strategy.type=none"))
    wait_for_job_state(cluster, failed, "FAILED", 120)
    running = submit_detached(cluster, work, "long-running-job", 20_000,
                              options=("-D", "execution.checkpointing.interval=2 s"))
    wait_for_job_state(cluster, running, "RUNNING", 120)
    prog = work / "example_job.py"
    prog.write_text(SLOW_KEYED_PROGRAM)
    upload = httpx.post(f"{cluster['rest']}/jars/upload",
                        headers={"Authorization": f"Bearer {cluster['secret']}"},
                        files={"jarfile": (prog.name, prog.read_bytes(), "text/x-python")})
    upload.raise_for_status()
    return {"q3": q3_id, "failed": failed, "running": running}


def _capture(cluster: dict[str, Any], ids: dict[str, str], out: Path) -> list[Path]:
    from playwright.sync_api import expect, sync_playwright

    q3_vertices = httpx.get(f"{cluster['rest']}/jobs/{ids['q3']}").json()["vertices"]
    tm_id = httpx.get(f"{cluster['rest']}/taskmanagers").json()["taskmanagers"][0]["id"]
    shots = [
        ("overview", "#/overview", "[data-stat='Task Managers']"),
        ("running-jobs", "#/jobs/running", "[data-testid=running-jobs]"),
        ("job-graph", f"#/jobs/{ids['q3']}/vertices/{q3_vertices[3]['id']}",
         "[data-testid=subtasks]"),
        ("job-running", f"#/jobs/{ids['running']}", "[data-testid=job-graph]"),
        ("job-exceptions", f"#/jobs/{ids['failed']}/exceptions", "[data-testid=exception-entry]"),
        ("job-timeline", f"#/jobs/{ids['q3']}/timeline", "[data-testid=timeline]"),
        ("job-checkpoints", f"#/jobs/{ids['running']}/checkpoints", "[data-testid=checkpoints]"),
        ("job-configuration", f"#/jobs/{ids['q3']}/configuration", "[data-testid=job-config]"),
        ("taskmanagers", "#/taskmanagers", "[data-testid=taskmanagers]"),
        ("taskmanager-logs", f"#/taskmanagers/{tm_id}/logs", "[data-testid=log-files]"),
        ("jobmanager", "#/jobmanager", "[data-testid=jm-config]"),
        ("submit", "#/submit", "[data-testid=jars]"),
    ]
    written = []
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        page = browser.new_context(base_url=cluster["rest"], viewport=VIEWPORT).new_page()
        for name, route, ready in shots:
            page.goto("/" + route)
            page.wait_for_function("key => document.getElementById('content').dataset.route === key",
                                   arg=route[1:], timeout=30_000)  # this route's page is drawn
            expect(page.locator(ready).first).to_be_visible(timeout=30_000)
            if name == "job-exceptions":
                page.locator(".stacktrace summary").nth(0).click()
            if name == "submit":
                page.locator("[data-testid=select-program]").first.click()
                page.fill("[data-testid=program-args]", "/tmp/out 1000 'my job'")
                page.fill("[data-testid=parallelism]", "2")
            path = out / f"web-{name}.png"
            page.screenshot(path=str(path), full_page=name not in ("taskmanager-logs",))
            written.append(path)
        # the failed attempt's log, one click from the exception history
        page.goto(f"/#/jobs/{ids['failed']}/exceptions")
        page.locator("[data-testid=exception-log]").first.click()
        expect(page.locator("[data-testid=log-content]")).to_contain_text("web-ui-boom")
        page.locator("[data-testid=log-content]").evaluate("el => el.scrollTop = el.scrollHeight")
        path = out / "web-log-viewer.png"
        page.screenshot(path=str(path))
        written.append(path)
        browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    parser.add_argument("--data", type=Path, default=REPO / "data" / "test")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        parser.error(f"{CHROMIUM} is missing: apt-get install chromium")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="flintlock-screenshots-") as tmp:
        work = Path(tmp)
        cluster_gen = web_cluster_state(work / "state", refresh="3 s")
        cluster = next(cluster_gen)
        try:
            ids = _prepare(cluster, work, args.data)
            for path in _capture(cluster, ids, args.out):
                print(path)
            httpx.patch(f"{cluster['rest']}/jobs/{ids['running']}?mode=cancel")
        finally:
            cluster_gen.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
