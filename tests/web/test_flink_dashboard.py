"""Apache Flink 2.1's own web dashboard against a flintlock session cluster (issue 17).

The dashboard is the ``web/`` folder of the flink-dist jar that ``tests/process/flink_home.py``
downloads from PyPI; the JobManager serves it at ``/flink/`` (``web.flink-dashboard.path``) and
answers its REST calls there. Debian's chromium visits every route of the dashboard's router
with a running, a finished, a failed and a cancelled job, and the test fails on any REST answer
that is not 2xx and on any console error or uncaught exception, listing all of them.

``FLINTLOCK_FLINK_SCREENSHOTS=<dir>`` also saves one screenshot per route there (what
``docs/images/flink-*.png`` were taken with).
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_helpers import wait_for_job_state
from web_cluster import submit_detached

pytestmark = [pytest.mark.web, pytest.mark.process, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.timeout(900)]

#: how long each route is watched after it rendered (the dashboard refreshes every 300 ms here:
#: at least one refresh)
WATCH_S = 0.4
#: a page with requests in flight this long is taken as settled if none of them is stuck: the
#: dashboard polls every 300 ms here, so on a busy machine its next requests often start before
#: the last ones ended and a page that polls is never quiet
BUSY_S = 12.0
#: a request in flight this long is stuck
STUCK_S = 12.0
#: how long a page's code editors (log and configuration viewers) must keep their size before the
#: test leaves the route: Flink's ``flinkAutoResize`` and ng-zorro's ``nz-code-editor`` each
#: debounce a resize by 50 ms, and ng-zorro's ``takeUntil(destroy$)`` before its debounce flushes
#: a pending resize after the editor was disposed ("Cannot read properties of null (reading
#: 'layout')"), so leaving within ~100 ms of a resize throws in the dashboard, not in flintlock
EDITOR_QUIET_S = 0.3
#: the sizes of the page's code editors and whether Monaco has rendered in each
_EDITOR_SIZES_JS = """() => Array.from(document.querySelectorAll('nz-code-editor')).map(
    e => [e.clientWidth, e.clientHeight, !!e.querySelector('.monaco-editor')])"""
#: rows of the job that keeps running through the test (20 ms each: ~30 min)
RUNNING_ROWS = 90_000

VERTEX_TABS = ("detail", "subtasks", "taskmanagers", "watermarks", "accumulators", "metrics",
               "backpressure", "flamegraph")
JOB_TABS = ("overview", "timeline", "exceptions", "checkpoints", "configuration", "dataskew")
JOB_MANAGER_TABS = ("metrics", "config", "logs", "stdout", "log", "thread-dump", "profiler")
TASK_MANAGER_TABS = ("metrics", "logs", "stdout", "log-list", "thread-dump", "profiler")


def _get(cluster: dict[str, Any], path: str) -> Any:
    answer = httpx.get(f"{cluster['rest']}{path}", timeout=30)
    assert answer.status_code == 200, (path, answer.status_code, answer.text[:500])
    return answer.json()


@pytest.fixture(scope="module")
def jobs(web_cluster: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """{"running": jid, "finished": jid, "failed": jid, "cancelled": jid}; the running job is
    cancelled afterwards."""
    if not web_cluster["flink_dashboard"]:
        pytest.skip("Apache Flink's dashboard could not be downloaded (no PyPI)")
    work = tmp_path_factory.mktemp("flink-dashboard-jobs")
    no_restart = ("-D", "restart-strategy.type=none")
    finished = submit_detached(web_cluster, work, "flink-ui-finished", 40)
    wait_for_job_state(web_cluster, finished, "FINISHED", 180)
    failed = submit_detached(web_cluster, work, "flink-ui-failed", 60, fail_at=20, options=no_restart)
    wait_for_job_state(web_cluster, failed, "FAILED", 180)
    cancelled = submit_detached(web_cluster, work, "flink-ui-cancelled", RUNNING_ROWS)
    wait_for_job_state(web_cluster, cancelled, "RUNNING", 120)
    assert httpx.patch(f"{web_cluster['rest']}/jobs/{cancelled}?mode=cancel").status_code == 202
    wait_for_job_state(web_cluster, cancelled, "CANCELED", 120)
    # last: a running job's Spark work would hold up the others on two cores
    running = submit_detached(web_cluster, work, "flink-ui-running", RUNNING_ROWS)
    wait_for_job_state(web_cluster, running, "RUNNING", 120)
    yield {"running": running, "finished": finished, "failed": failed, "cancelled": cancelled}
    httpx.patch(f"{web_cluster['rest']}/jobs/{running}?mode=cancel")
    wait_for_job_state(web_cluster, running, "CANCELED", 120)


def _routes(cluster: dict[str, Any], jobs: dict[str, str]) -> list[str]:
    """Every route of Flink 2.1's router (``main``, ``job``, ``job-manager`` and ``task-manager``
    route modules), with real ids."""
    routes = ["overview", "submit", "job/running", "job/completed"]
    routes += [f"job-manager/{tab}" for tab in JOB_MANAGER_TABS]
    jm_logs = [log["name"] for log in _get(cluster, "/jobmanager/logs")["logs"]]
    routes += [f"job-manager/log/{name}" for name in jm_logs[:1]]
    routes.append("task-manager")
    for tm in _get(cluster, "/taskmanagers")["taskmanagers"]:
        routes += [f"task-manager/{tm['id']}/{tab}" for tab in TASK_MANAGER_TABS]
        tm_logs = [log["name"] for log in _get(cluster, f"/taskmanagers/{tm['id']}/logs")["logs"]]
        routes += [f"task-manager/{tm['id']}/log-list/{name}" for name in tm_logs[:1]]
    for kind, job_id in jobs.items():
        base = f"job/{'running' if kind == 'running' else 'completed'}/{job_id}"
        tabs = JOB_TABS + (() if kind == "running" else ("cluster_configuration",))
        routes.append(f"{base}/overview")
        for vertex in _get(cluster, f"/jobs/{job_id}")["vertices"]:
            # from the job graph, as a click on a node opens it: Flink 2.1's drawer throws
            # "Cannot read properties of undefined (reading 'data')" when entered from another tab
            routes += [f"{base}/overview/{vertex['id']}/{tab}" for tab in VERTEX_TABS]
            routes.append(f"{base}/overview")
        routes += [f"{base}/{tab}" for tab in tabs if tab != "overview"]
    return routes


class _Watch:
    """What the page did: REST answers that were not 2xx, console errors, uncaught exceptions,
    requests stuck in flight; each problem is kept with the route it happened on."""

    def __init__(self, page: Any, prefix: str) -> None:
        self.route = "(loading)"
        self.problems: list[tuple[str, str]] = []
        #: request -> when it started (``time.monotonic``)
        self.in_flight: dict[Any, float] = {}
        self.answers = 0
        #: route -> how many code editors it showed (rendered by Monaco)
        self.editors: dict[str, int] = {}
        self._prefix = prefix
        page.on("request", self._request)
        page.on("requestfinished", self._done)
        page.on("requestfailed", self._failed)
        page.on("response", self._response)
        page.on("console", lambda m: m.type == "error" and self._problem(f"console: {m.text}"))
        page.on("pageerror", lambda exc: self._problem(f"uncaught: {exc}"))

    def _problem(self, what: str) -> None:
        self.problems.append((self.route, what))

    def _request(self, request: Any) -> None:
        self.in_flight[request] = time.monotonic()

    def _done(self, request: Any) -> None:
        self.in_flight.pop(request, None)
        self.answers += 1

    def _failed(self, request: Any) -> None:
        self.in_flight.pop(request, None)
        if request.failure != "net::ERR_ABORTED":  # a poll cut short by navigation
            self._problem(f"{request.method} {request.url}: {request.failure}")

    def _response(self, response: Any) -> None:
        if response.url.startswith(self._prefix) and not 200 <= response.status < 300:
            self._problem(f"{response.request.method} {response.url[len(self._prefix):]} -> "
                          f"{response.status} {response.text()[:200]!r}")

    def _stuck(self) -> list[str]:
        now = time.monotonic()
        return [f"{r.method} {r.url} ({now - t:.0f} s)" for r, t in self.in_flight.items()
                if now - t > STUCK_S]

    def settle(self, page: Any, timeout_s: float = 20.0) -> None:
        """Watch for ``WATCH_S`` after the route's first answers, until nothing is in flight, or
        after ``BUSY_S`` until no request has been in flight longer than ``STUCK_S`` (a page's
        polls may overlap; none may hang)."""
        start, answers = time.monotonic(), self.answers
        while time.monotonic() < start + timeout_s:
            elapsed = time.monotonic() - start
            if self.answers > answers and (
                    (elapsed >= WATCH_S and not self.in_flight)
                    or (elapsed >= BUSY_S and not self._stuck())):
                self._editors_settle(page, start + timeout_s)
                return
            page.wait_for_timeout(50)  # lets Playwright deliver the page's events
        stuck = self._stuck()
        self._problem(f"{len(stuck)} requests stuck in flight: {', '.join(stuck)}" if stuck
                      else f"no answer within {timeout_s} s")

    def _editors_settle(self, page: Any, deadline: float) -> None:
        """Wait until every code editor on the page shows Monaco and kept its size for
        ``EDITOR_QUIET_S`` (see there); a problem names the sizes seen when it never does."""
        sizes, since = None, time.monotonic()
        while True:
            now_sizes = page.evaluate(_EDITOR_SIZES_JS)
            if not now_sizes:  # no code editor on the page
                return
            now = time.monotonic()
            if now_sizes != sizes:
                sizes, since = now_sizes, now
            elif all(rendered for _, _, rendered in sizes) and now - since >= EDITOR_QUIET_S:
                self.editors[self.route] = len(sizes)
                return
            if now > deadline:
                self._problem(f"code editors never settled: [width, height, rendered] {sizes}")
                return
            page.wait_for_timeout(50)


def test_every_route_of_flinks_dashboard_renders_without_errors(
        browser: Any, web_cluster: dict[str, Any], jobs: dict[str, str]) -> None:
    base = f"{web_cluster['rest']}/flink/"
    shots = os.environ.get("FLINTLOCK_FLINK_SCREENSHOTS")
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(30_000)
    page = context.new_page()
    watch = _Watch(page, base)
    routes = _routes(web_cluster, jobs)
    try:
        page.goto(base + "#/overview")
        page.wait_for_selector("flink-root nz-layout", state="attached")
        for route in routes:
            watch.route = route
            page.evaluate("hash => { window.location.hash = hash; }", "#/" + route)
            watch.settle(page)
            if shots:
                Path(shots).mkdir(parents=True, exist_ok=True)
                name = route
                for kind, jid in jobs.items():  # e.g. job_completed_failed_exceptions.png
                    name = name.replace(jid, kind)
                name = re.sub(r"[0-9a-f]{32}", "ID", name).replace("/", "_")
                page.screenshot(path=str(Path(shots) / f"{name}.png"))
    finally:
        context.close()
    counts = Counter(f"{route}: {what}" for route, what in watch.problems)
    # the log viewers were waited for (a route's error shows on the next route, when its editor
    # is disposed: the stdout viewer's on job-manager/log)
    assert all(watch.editors.get(f"job-manager/{tab}", 0) >= 1 for tab in ("logs", "stdout")), \
        watch.editors
    assert not counts, (f"{len(watch.problems)} problems on {len(routes)} routes of Flink's "
                        "dashboard:\n" + "\n".join(f"{n}x {p}" for p, n in counts.most_common()))
