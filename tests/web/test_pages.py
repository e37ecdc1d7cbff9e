"""The dashboard's pages and pure JS helpers in chromium, against canned REST answers (no cluster).

Playwright serves the packaged static files (with their Content-Security-Policy) and answers the
REST calls from a dict, so these tests are fast and can stage what a cluster rarely shows: hostile
names, failing endpoints, byte-exact log pages.
"""

from __future__ import annotations

import json
import mimetypes
import re
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from flintlock.runtime.rest.web import SECURITY_HEADERS, STATIC_DIR

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails in CI) with the reason
    expect = None

pytestmark = [pytest.mark.web, pytest.mark.timeout(120)]

ORIGIN = "http://dashboard.test"
JID = "a" * 32
VID_SRC, VID_MAP, VID_SINK = "1" * 32, "2" * 32, "3" * 32
EVIL = '<img src=x onerror="window.pwned=1">'

Answer = Any  # a JSON body, (status, body[, headers]), or a callable(path?query) -> either


def _config(submit: bool = True) -> dict[str, Any]:
    return {"refresh-interval": 200, "flink-version": "2.1-flintlock", "features": {
        "web-submit": submit, "web-cancel": True}}


def _job_row(name: str, state: str) -> dict[str, Any]:
    return {"jid": JID, "name": name, "start-time": 1_700_000_000_000, "end-time": -1,
            "duration": 5000, "state": state, "last-modification": 0,
            "tasks": {"total": 2, "running": 1, "created": 1}}


class Site:
    """Routes the page's requests: static files from the package, REST from ``answers``."""

    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers
        self.requests: list[str] = []

    def handle(self, route: Any) -> None:
        url = urlsplit(route.request.url)
        path = url.path
        if path in ("/", "/index.html") or path.startswith("/web/"):
            file = STATIC_DIR / ("index.html" if path in ("/", "/index.html") else path[5:])
            ctype = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
            if file.suffix == ".js":
                ctype = "text/javascript"
            route.fulfill(status=200, body=file.read_bytes(), headers={
                **SECURITY_HEADERS, "Content-Type": ctype})
            return
        key = path.lstrip("/") + (f"?{url.query}" if url.query else "")
        self.requests.append(f"{route.request.method} {key}")
        answer = self.answers.get(key, self.answers.get(path.lstrip("/")))
        if callable(answer):
            answer = answer(key)
        if answer is None:
            answer = (404, {"errors": [f"Not found: /{key}"]})
        status, body, *extra = answer if isinstance(answer, tuple) else (200, answer)
        if isinstance(body, (bytes, str)):
            route.fulfill(status=status, body=body,
                          headers={"Content-Type": "text/plain", **(extra[0] if extra else {})})
        else:
            route.fulfill(status=status, body=json.dumps(body),
                          headers={"Content-Type": "application/json"})


@pytest.fixture
def open_page(browser: Any) -> Iterator[Callable[..., tuple[Any, Site]]]:
    """``open_page(answers, hash)`` -> (page, site); fails on JS errors and CSP violations."""
    contexts = []
    problems: list[str] = []

    def opener(answers: dict[str, Answer], hash_route: str = "#/overview") -> tuple[Any, Site]:
        site = Site({"config": _config(), **answers})
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        context.set_default_timeout(10_000)
        context.route(f"{ORIGIN}/**", site.handle)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
        page.on("console", lambda msg: problems.append(f"console: {msg.text}")
                if "Content Security Policy" in msg.text else None)
        page.goto(f"{ORIGIN}/{hash_route}")
        return page, site

    yield opener
    for context in contexts:
        context.close()
    assert not problems, problems


def _module(page: Any, module: str, expression: str) -> Any:
    """Evaluate ``expression`` with the ES module bound to ``m``."""
    return page.evaluate(f"import('/web/js/{module}').then((m) => {expression})")


def test_split_args_follows_shell_quoting(open_page: Callable[..., Any]) -> None:
    page, _ = open_page({"overview": {}, "jobs/overview": {"jobs": []}})
    split = "(s) => { try { return m.splitArgs(s); } catch (e) { return 'error: ' + e.message; } }"
    cases = {
        "": [],
        "  a  b ": ["a", "b"],
        "--name 'my job' x": ["--name", "my job", "x"],
        '"a \\"b\\"" c\\ d': ['a "b"', "c d"],
        "''": [""],
        "'open": "error: unclosed ' quote in the program arguments",
    }
    for text, expected in cases.items():
        assert _module(page, "pages/submit.js", f"({split})({json.dumps(text)})") == expected, text


def test_dag_layout_layers_by_depth(open_page: Callable[..., Any]) -> None:
    page, _ = open_page({"overview": {}, "jobs/overview": {"jobs": []}})
    plan = {"nodes": [
        {"id": "s1", "description": "S1", "inputs": []},
        {"id": "s2", "description": "S2", "inputs": []},
        {"id": "j", "description": "Join", "inputs": [{"id": "s1", "ship_strategy": "HASH"},
                                                       {"id": "s2", "ship_strategy": "HASH"}]},
        {"id": "k", "description": "Sink", "inputs": [{"id": "j", "ship_strategy": "FORWARD"},
                                                       {"id": "s1", "ship_strategy": "BROADCAST"}]},
    ]}
    g = _module(page, "dag.js", f"""(() => {{
        const g = m.layout({json.dumps(plan)}, []);
        return {{x: Object.fromEntries(g.nodes.map((n) => [n.id, n.x])),
                 edges: g.edges.map((e) => [e.source.id, e.target.id, e.label]),
                 width: g.width}};
    }})()""")
    assert g["x"]["s1"] == g["x"]["s2"] < g["x"]["j"] < g["x"]["k"]  # sinks right of their inputs
    assert sorted(g["edges"]) == [["j", "k", "FORWARD"], ["s1", "j", "HASH"],
                                  ["s1", "k", "BROADCAST"], ["s2", "j", "HASH"]]
    assert g["width"] > g["x"]["k"]


def test_a_running_streaming_vertex_shows_back_pressure_instead_of_a_progress_bar(
        open_page: Callable[..., Any]) -> None:
    page, _ = open_page({"overview": {}, "jobs/overview": {"jobs": []}})
    plan = {"nodes": [{"id": "src", "description": "Source", "inputs": []},
                      {"id": "win", "description": "Window", "inputs": [
                          {"id": "src", "ship_strategy": "HASH"}]}]}
    vertices = [{"id": vid, "name": vid, "parallelism": 2, "status": "RUNNING",
                 "tasks": {"RUNNING": 2}, "metrics": {"write-records": 5000}}
                for vid in ("src", "win")]
    live = {"src": {"level": "high", "ratio": 0.834, "busy": 0.12, "rate": 1234.4}}
    got = _module(page, "dag.js", f"""(() => {{
        const svg = m.dagSvg({json.dumps(plan)}, {json.dumps(vertices)}, null, () => {{}},
                             {json.dumps(live)});
        const node = (id) => svg.querySelector(`[data-vertex-id="${{id}}"]`);
        const bp = node("src").querySelector("[data-backpressure]");
        return {{text: bp.textContent, cls: bp.getAttribute("class"),
                 srcBars: node("src").querySelectorAll(".dag-progress-fill").length,
                 winBars: node("win").querySelectorAll(".dag-progress-fill").length}};
    }})()""")
    assert got["text"] == "Back pressure: HIGH 83% · busy 12% · 1,234 rec/s"
    assert "dag-bp-high" in got["cls"]
    assert (got["srcBars"], got["winBars"]) == (0, 1)  # batch-style bar where no live data


def test_a_vertex_whose_parallelism_is_not_decided_yet_shows_auto(open_page: Callable[..., Any]) -> None:
    # the AdaptiveBatchScheduler reports -1 (as Flink's REST) until a vertex's inputs finished
    page, _ = open_page({"overview": {}, "jobs/overview": {"jobs": []}})
    plan = {"nodes": [{"id": "src", "description": "Source", "inputs": []},
                      {"id": "agg", "description": "Aggregate", "inputs": [
                          {"id": "src", "ship_strategy": "HASH"}]}]}
    vertices = [{"id": "src", "name": "Source", "parallelism": 2, "status": "RUNNING",
                 "tasks": {"RUNNING": 2}, "metrics": {}},
                {"id": "agg", "name": "Aggregate", "parallelism": -1, "status": "CREATED",
                 "tasks": {}, "metrics": {}}]
    got = _module(page, "dag.js", f"""(() => {{
        const svg = m.dagSvg({json.dumps(plan)}, {json.dumps(vertices)}, null, () => {{}});
        const par = (id) => svg.querySelector(`[data-vertex-id="${{id}}"] .dag-par`).textContent;
        return [par("src"), par("agg")];
    }})()""")
    assert got == ["Parallelism: 2", "Parallelism: auto"]
    assert _module(page, "format.js", "[m.parallelismText(-1), m.parallelismText(3), "
                   "m.parallelismText(undefined)]") == ["auto", "3", "-"]


def test_a_join_decided_at_run_time_shows_its_strategy(open_page: Callable[..., Any]) -> None:
    # the plan's operator_strategy, set when the AdaptiveBatchScheduler made a join a broadcast
    # join or split its skewed subpartitions
    page, _ = open_page({"overview": {}, "jobs/overview": {"jobs": []}})
    strategy = "BROADCAST_HASH_JOIN (adaptive, right side 40213 bytes)"
    plan = {"nodes": [{"id": "src", "description": "Source", "inputs": []},
                      {"id": "j", "description": "Join", "operator_strategy": strategy,
                       "inputs": [{"id": "src", "ship_strategy": "HASH"}]}]}
    got = _module(page, "dag.js", f"""(() => {{
        const svg = m.dagSvg({json.dumps(plan)}, [], null, () => {{}});
        const el = (id) => svg.querySelector(`[data-vertex-id="${{id}}"]`);
        const text = el("j").querySelector(".dag-strategy");
        return {{shown: text.textContent, full: text.getAttribute("data-operator-strategy"),
                 title: el("j").querySelector("title").textContent,
                 others: el("src").querySelectorAll(".dag-strategy").length,
                 heights: [el("src"), el("j")].map((g) => +g.querySelector(".dag-box")
                   .getAttribute("height"))}};
    }})()""")
    assert got["full"] == strategy and got["title"].endswith("\n" + strategy)
    assert got["shown"] == strategy[:30] + "…"  # clipped to the node's width
    assert got["others"] == 0 and got["heights"][1] == got["heights"][0] + 16


def test_a_speculative_attempt_is_listed_under_its_subtask(open_page: Callable[..., Any]) -> None:
    """Speculative execution: REST lists a subtask's other current attempts under
    ``other-concurrent-attempts``; the subtask table shows each as a row of its own."""
    def attempt(number: int, tm: str) -> dict[str, Any]:
        return {"subtask": 0, "attempt": number, "status": "RUNNING", "taskmanager-id": tm,
                "endpoint": tm, "start-time": 1_700_000_000_000, "end-time": -1,
                "duration": 1000, "metrics": {}}
    details = {"id": VID_MAP, "name": "Map", "subtasks": [
        {**attempt(0, "tm-slow"), "other-concurrent-attempts": [attempt(1, "tm-fast")]}]}
    page, _ = open_page({"overview": {}, "jobs/overview": {"jobs": [_job_row("j", "RUNNING")]},
                         f"jobs/{JID}/vertices/{VID_MAP}": details})
    rows = _module(page, "pages/job_vertices.js", f"""m.subtasksView({{jid: "{JID}"}},
        "{VID_MAP}", null).then((card) => [...card.querySelectorAll("tbody tr")].map((tr) => (
            {{attempt: tr.dataset.attempt, cls: tr.className,
              text: tr.children[1].textContent}})))""")
    assert rows == [{"attempt": "0", "cls": "", "text": "0"},
                    {"attempt": "1", "cls": "concurrent", "text": "1 speculative"}]


def test_timeline_segments_and_task_names(open_page: Callable[..., Any]) -> None:
    page, _ = open_page({"overview": {}, "jobs/overview": {"jobs": []}})
    segs = _module(page, "pages/job_timeline.js", """m.segments(
        {CREATED: 100, SCHEDULED: 0, DEPLOYING: 150, RUNNING: 200, FAILED: 400}, 999)""")
    assert segs == [{"state": "CREATED", "start": 100, "end": 150},
                    {"state": "DEPLOYING", "start": 150, "end": 200},
                    {"state": "RUNNING", "start": 200, "end": 400},
                    {"state": "FAILED", "start": 400, "end": 400, "marker": True}]
    running = _module(page, "pages/job_timeline.js", "m.segments({CREATED: 10, RUNNING: 20}, 50)")
    assert running[-1] == {"state": "RUNNING", "start": 20, "end": 50}  # lasts until now
    prior = _module(page, "pages/job_timeline.js", """m.attemptSegments({status: "FAILED",
        "end-time": 1000, "status-duration": {CREATED: 100, SCHEDULED: 0, DEPLOYING: 50,
        INITIALIZING: 0, RUNNING: 300}})""")
    assert [(s["state"], s["start"], s["end"]) for s in prior] == [
        ("CREATED", 550, 650), ("DEPLOYING", 650, 700), ("RUNNING", 700, 1000),
        ("FAILED", 1000, 1000)]
    parsed = _module(page, "pages/logs.js", "m.parseTaskName('Source: a -> Map (2/4)#3')")
    assert parsed == {"name": "Source: a -> Map", "subtask": 1, "parallelism": 4, "attempt": 3}


def test_log_links_follow_the_naming_rule(open_page: Callable[..., Any]) -> None:
    page, _ = open_page({"overview": {}, "jobs/overview": {"jobs": []}})
    job = {"jid": JID, "vertices": [{"id": VID_MAP, "name": "Source: a -> Map", "parallelism": 4}]}
    href = f"(info) => m.attemptLogHref(info, {json.dumps(job)})"
    tm = "127.0.0.1:5000-abc"
    from_entry = _module(page, "pages/logs.js", f"""({href})({{taskManagerId: "{tm}",
        taskName: "Source: a -> Map (2/4)#3"}})""")
    assert from_entry == f"#/logs/taskmanager/127.0.0.1%3A5000-abc/task-{JID}-{VID_MAP}-1-3.log"
    from_row = _module(page, "pages/logs.js", f"""({href})({{"taskmanager-id": "{tm}",
        vertexId: "{VID_MAP}", subtask: 0, attempt: 0}})""")
    assert from_row.endswith(f"/task-{JID}-{VID_MAP}-0-0.log")
    given = _module(page, "pages/logs.js", f"""({href})({{"taskmanager-id": "{tm}",
        "log-url": "/taskmanagers/x/logs/given.log"}})""")
    assert given.endswith("/given.log")
    unknown = _module(page, "pages/logs.js", f"""({href})({{taskManagerId: "{tm}",
        taskName: "Other (1/1)#0"}})""")
    assert unknown == "#/taskmanagers/127.0.0.1%3A5000-abc/logs"  # the TaskManager's log list
    assert _module(page, "pages/logs.js", f"({href})({{taskManagerId: '(unassigned)'}})") is None


def test_api_text_is_never_markup(open_page: Callable[..., Any]) -> None:
    job = {"jid": JID, "name": EVIL, "state": "RUNNING", "job-type": "BATCH", "start-time": 1,
           "end-time": -1, "duration": 10, "now": 11, "status-counts": {"RUNNING": 1},
           "vertices": [{"id": VID_SRC, "name": f"Source: {EVIL}", "parallelism": 1,
                         "status": "RUNNING", "tasks": {"RUNNING": 1}, "metrics": {},
                         "start-time": 1, "duration": 10}],
           "plan": {"nodes": [{"id": VID_SRC, "description": EVIL, "inputs": []}]}}
    page, _ = open_page({
        "overview": {"taskmanagers": 1, "slots-total": 2, "slots-available": 1,
                     "jobs-running": 1, "jobs-finished": 0, "jobs-failed": 0,
                     "jobs-cancelled": 0},
        "jobs/overview": {"jobs": [_job_row(EVIL, "RUNNING")]},
        f"jobs/{JID}": job,
    })
    expect(page.locator("[data-testid=running-jobs] a.job-link")).to_have_text(EVIL)
    page.locator("[data-testid=running-jobs] a.job-link").click()
    expect(page.locator("[data-testid=job-name]")).to_have_text(EVIL)
    expect(page.locator("[data-testid=job-graph] g.dag-node")).to_contain_text("Source: <img")
    assert page.locator("img[src=x]").count() == 0
    assert page.evaluate("window.pwned") is None


def test_api_errors_are_visible_and_refresh_failures_keep_the_page(
        open_page: Callable[..., Any]) -> None:
    state = {"fail": False, "pending": 0}

    def overview(_: str) -> Answer:
        if state["fail"]:
            return 503, {"errors": ["dispatcher unreachable"]}
        return {"taskmanagers": 3, "slots-total": 6, "slots-available": 6, "jobs-running": 0,
                "jobs-finished": 0, "jobs-failed": 0, "jobs-cancelled": 0,
                "taskmanagers-pending": state["pending"]}

    page, _ = open_page({"overview": overview, "jobs/overview": {"jobs": []},
                         "taskmanagers": (500, {"errors": ["TaskManager registry broken"]})})
    expect(page.locator('[data-stat="Task Managers"] .stat-value')).to_have_text("3")
    state["pending"] = 2  # an active ResourceManager starts two more
    expect(page.locator('[data-stat="Task Managers"] .stat-value')).to_have_text("3 (+2 starting)")
    state["pending"] = 0
    expect(page.locator('[data-stat="Task Managers"] .stat-value')).to_have_text("3")
    state["fail"] = True  # the next refresh fails: the last good page stays, with a banner
    expect(page.locator("#error-banner")).to_contain_text("HTTP 503: dispatcher unreachable")
    expect(page.locator('[data-stat="Task Managers"] .stat-value')).to_have_text("3")
    state["fail"] = False
    expect(page.locator("#error-banner")).to_be_hidden()

    page.click("#nav a[data-nav=taskmanagers]")  # a page that cannot load says why
    expect(page.locator(".error-box")).to_contain_text("HTTP 500")
    expect(page.locator(".error-box")).to_contain_text("TaskManager registry broken")


def test_task_managers_being_started_or_stopped_are_listed(
        open_page: Callable[..., Any]) -> None:
    now = int(time.time() * 1000) - 5_000  # requested 5 s ago
    state: dict[str, Any] = {"pending": [
        {"id": "application-7-taskmanager-2", "state": "STARTING", "since": now, "slotsNumber": 2,
         "cpuCores": 2, "taskHeapMemory": 3072, "managedMemory": 512},
        {"id": "application-7-taskmanager-1", "state": "STOPPING", "since": now,
         "slotsNumber": 1, "cpuCores": 1, "taskHeapMemory": 0, "managedMemory": 0}],
        "held_back": "1 TaskManager(s) not started: slotmanager.number-of-slots.max (3) reached"}

    def task_managers(_: str) -> Answer:
        body = {"taskmanagers": [], "pendingTaskManagers": state["pending"]}
        if state["held_back"]:
            body["heldBack"] = state["held_back"]
        return body

    page, _ = open_page({"overview": {}, "jobs/overview": {"jobs": []},
                         "taskmanagers": task_managers}, "#/taskmanagers")
    rows = page.locator("[data-testid=pending-taskmanagers] tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_have_attribute("data-state", "STARTING")
    expect(rows.nth(0)).to_contain_text("application-7-taskmanager-2")
    expect(rows.nth(0)).to_contain_text("starting")
    expect(rows.nth(0)).to_contain_text("3.00 GB")
    expect(rows.nth(0)).to_contain_text(re.compile(r"starting\d+s ago"))
    expect(rows.nth(1)).to_contain_text("stopping")
    expect(rows.nth(1)).to_contain_text("default")
    expect(page.locator("[data-testid=held-back]")).to_have_text(state["held_back"])
    state.update(pending=[], held_back="")  # all registered: the card goes away on refresh
    expect(page.locator("[data-testid=pending-taskmanagers]")).to_have_count(0)
    expect(page.locator("[data-testid=taskmanagers]")).to_be_visible()


def test_submit_is_hidden_when_the_cluster_disables_it(open_page: Callable[..., Any]) -> None:
    page, site = open_page({"config": _config(submit=False), "overview": {},
                            "jobs/overview": {"jobs": []}}, "#/submit")
    expect(page.locator("#content")).to_contain_text("web.submit.enable: false")
    expect(page.locator("#nav-submit")).to_be_hidden()
    assert not [r for r in site.requests if "jars" in r]


def test_cancel_asks_for_confirmation(open_page: Callable[..., Any]) -> None:
    job = {"jid": JID, "name": "j", "state": "RUNNING", "vertices": [], "plan": {"nodes": []},
           "status-counts": {}, "start-time": 1, "end-time": -1, "duration": 1}
    page, site = open_page({f"jobs/{JID}": job, f"jobs/{JID}?mode=cancel": {}}, f"#/jobs/{JID}")
    page.click("[data-testid=cancel-job]")
    page.click("[data-testid=keep-job]")
    expect(page.locator("[data-testid=cancel-job]")).to_be_visible()
    assert not [r for r in site.requests if r.startswith("PATCH")]
    page.click("[data-testid=cancel-job]")
    page.click("[data-testid=confirm-cancel]")
    expect(page.locator("[data-testid=cancel-requested]")).to_be_visible()
    assert f"PATCH jobs/{JID}?mode=cancel" in site.requests



T0 = 1_700_000_000_000


def _job(job_type: str = "STREAMING", state: str = "RUNNING") -> dict[str, Any]:
    return {"jid": JID, "name": "j", "state": state, "job-type": job_type, "vertices": [],
            "plan": {"nodes": []}, "status-counts": {}, "start-time": T0, "end-time": -1,
            "duration": 1}


def _checkpoint(cid: int, status: str, trigger: int, ack: int, e2e: int, size: int,
                acked: int = 2, savepoint: bool = False, **extra: Any) -> dict[str, Any]:
    """One ``<checkpoint>`` of ``GET /jobs/:jobid/checkpoints`` (handlers/checkpoints.py)."""
    return {"className": status.lower(), "id": cid, "status": status, "is_savepoint": savepoint,
            "savepointFormat": "NATIVE" if savepoint else None, "trigger_timestamp": trigger,
            "latest_ack_timestamp": ack, "checkpointed_size": size, "state_size": size,
            "end_to_end_duration": e2e, "alignment_buffered": 0, "processed_data": 0,
            "persisted_data": 0, "num_subtasks": 2, "num_acknowledged_subtasks": acked,
            "checkpoint_type": "SAVEPOINT" if savepoint else "CHECKPOINT", "tasks": {}, **extra}


def _stats(history: list[dict[str, Any]], restored: dict[str, Any] | None = None,
           **summary: dict[str, float]) -> dict[str, Any]:
    def latest(pred: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        return next((c for c in history if pred(c)), None)

    zeros = dict.fromkeys(["min", "max", "avg", "p50", "p90", "p95", "p99", "p999"], 0)
    statuses = [c["status"] for c in history]
    return {
        "counts": {"restored": int(restored is not None), "total": len(history) + 1,
                   "in_progress": statuses.count("IN_PROGRESS"),
                   "completed": statuses.count("COMPLETED"), "failed": statuses.count("FAILED")},
        "summary": {key: summary.get(key, zeros) for key in (
            "checkpointed_size", "state_size", "end_to_end_duration", "alignment_buffered",
            "processed_data", "persisted_data")},
        "latest": {
            "completed": latest(lambda c: c["status"] == "COMPLETED" and not c["is_savepoint"]),
            "savepoint": latest(lambda c: c["status"] == "COMPLETED" and c["is_savepoint"]),
            "failed": latest(lambda c: c["status"] == "FAILED"),
            "restored": restored},
        "history": history}


def _checkpoint_config(interval: int = 60_000) -> dict[str, Any]:
    return {"mode": "exactly_once", "interval": interval, "timeout": 600_000, "min_pause": 500,
            "max_concurrent": 1, "externalization": {"enabled": True,
                                                     "delete_on_cancellation": False},
            "state_backend": "hashmap", "checkpoint_storage": "FileSystemCheckpointStorage",
            "unaligned_checkpoints": False, "tolerable_failed_checkpoints": 3,
            "aligned_checkpoint_timeout": 0, "checkpoints_after_tasks_finish": True,
            "state_changelog_enabled": False, "changelog_periodic_materialization_interval": -1,
            "changelog_storage": "memory"}


def test_checkpoints_tab_shows_counts_history_summary_and_configuration(
        open_page: Callable[..., Any]) -> None:
    savepoint_path = "file:/tmp/savepoints/savepoint-aaaaaa-3"
    restored = {"id": 1, "restore_timestamp": T0 + 1_000, "is_savepoint": True,
                "external_path": "file:/tmp/savepoints/savepoint-restored"}
    older = [
        _checkpoint(4, "FAILED", T0 + 40_000, -1, 600_000, 0, acked=1,
                    failure_timestamp=T0 + 640_000,
                    failure_message="Checkpoint expired before completing."),
        _checkpoint(3, "COMPLETED", T0 + 30_000, T0 + 31_500, 1_500, 3 * 1024 * 1024,
                    savepoint=True, external_path=savepoint_path, discarded=False),
        _checkpoint(2, "COMPLETED", T0 + 20_000, T0 + 20_850, 850, 1536,
                    external_path=f"file:/tmp/chk/{JID}/chk-2", discarded=False),
    ]
    summary = {"end_to_end_duration": {"min": 850, "max": 1500, "avg": 1175, "p50": 1175.0,
                                       "p90": 1435.0, "p95": 1467.5, "p99": 1493.5,
                                       "p999": 1499.35},
               "state_size": {"min": 1536, "max": 3 * 1024 * 1024, "avg": 1573632,
                              "p50": 1573632.0, "p90": 2831155.2, "p95": 2988441.6,
                              "p99": 3114270.72, "p999": 3142582.272}}
    in_progress = _checkpoint(5, "IN_PROGRESS", T0 + 50_000, T0 + 50_400, 400, 512, acked=1)
    done = {"now": False}

    def checkpoints(_: str) -> Answer:
        if done["now"]:  # checkpoint 5 completes between two refreshes
            finished = {**in_progress, "status": "COMPLETED", "className": "completed",
                        "num_acknowledged_subtasks": 2, "external_path": "file:/tmp/chk-5"}
            return _stats([finished, *older], restored, **summary)
        return _stats([in_progress, *older], restored, **summary)

    page, site = open_page({f"jobs/{JID}": _job(), f"jobs/{JID}/checkpoints": checkpoints,
                            f"jobs/{JID}/checkpoints/config": _checkpoint_config()},
                           f"#/jobs/{JID}/checkpoints")
    expect(page.locator("nav.tabs a.tab.active")).to_have_text("Checkpoints")
    counts = page.locator("[data-testid=checkpoint-counts]")
    for label, value in [("Triggered", "5"), ("In Progress", "1"), ("Completed", "2"),
                         ("Failed", "1"), ("Restored", "1")]:
        expect(counts.locator(f'[data-stat="{label}"] .stat-value')).to_have_text(value)

    rows = page.locator("[data-testid=checkpoint-row]")
    expect(rows).to_have_count(4)

    def t(ms: int) -> str:
        return str(_module(page, "format.js", f"m.time({ms})"))

    assert [rows.nth(i).locator("td").all_inner_texts() for i in range(4)] == [
        ["\u25b8 5", "IN_PROGRESS", "Checkpoint", "1/2", t(T0 + 50_000), t(T0 + 50_400), "400ms",
         "512 B", "-"],
        ["\u25b8 4", "FAILED", "Checkpoint", "1/2", t(T0 + 40_000), "-", "10m 0s", "0 B", "-"],
        ["\u25b8 3", "COMPLETED", "Savepoint", "2/2", t(T0 + 30_000), t(T0 + 31_500), "1.50s",
         "3.00 MB", savepoint_path],
        ["\u25b8 2", "COMPLETED", "Checkpoint", "2/2", t(T0 + 20_000), t(T0 + 20_850), "850ms",
         "1.50 KB", f"file:/tmp/chk/{JID}/chk-2"],
    ]
    failure = page.locator("[data-testid=checkpoint-failure]")  # the failed row's message
    expect(failure).to_have_count(1)
    expect(failure).to_have_attribute("data-checkpoint-id", "4")
    expect(failure).to_contain_text(f"Failed {t(T0 + 640_000)}: Checkpoint expired before")
    expect(page.locator("[data-testid=latest-failed]")).to_contain_text(
        "Checkpoint expired before completing.")
    expect(page.locator("[data-testid=latest-savepoint]")).to_contain_text(savepoint_path)
    expect(page.locator("[data-testid=latest-completed]")).to_contain_text("chk-2")
    latest_restored = page.locator("[data-testid=latest-restored]")
    expect(latest_restored).to_contain_text("file:/tmp/savepoints/savepoint-restored")
    expect(latest_restored).to_contain_text("Savepoint")
    expect(latest_restored).to_contain_text(t(T0 + 1_000))

    summary_table = page.locator("[data-testid=checkpoint-summary]")
    e2e = summary_table.locator("tr[data-metric=end_to_end_duration]")
    assert [e2e.locator(f"td[data-stat={p}]").inner_text() for p in ("min", "avg", "max")] == [
        "850ms", "1.18s", "1.50s"]
    size = summary_table.locator("tr[data-metric=state_size]")
    assert [size.locator(f"td[data-stat={p}]").inner_text() for p in ("min", "max")] == [
        "1.50 KB", "3.00 MB"]

    config = page.locator("[data-testid=checkpoint-config]")
    for key, value in [("mode", "Exactly Once"), ("interval", "1m 0s"), ("timeout", "10m 0s"),
                       ("min_pause", "500ms"), ("max_concurrent", "1"),
                       ("tolerable_failed_checkpoints", "3"),
                       ("externalization", "Enabled (retain on cancellation)"),
                       ("checkpoint_storage", "FileSystemCheckpointStorage")]:
        expect(config.locator(f"[data-config={key}]")).to_have_text(value)
    assert f"GET jobs/{JID}/checkpoints/config" in site.requests

    done["now"] = True  # the page refreshes like the others
    expect(rows.first).to_have_attribute("data-status", "COMPLETED")
    expect(rows.first.locator("td").nth(3)).to_have_text("2/2")


def _task(acked: int, ack: int, e2e: int, size: int) -> dict[str, Any]:
    """One vertex of a ``<checkpoint>``'s "tasks" (Flink ``TaskCheckpointStatistics``)."""
    return {"id": 7, "status": "COMPLETED", "latest_ack_timestamp": ack, "checkpointed_size": size,
            "state_size": size, "end_to_end_duration": e2e, "alignment_buffered": 0,
            "processed_data": 0, "persisted_data": 0, "num_subtasks": 2,
            "num_acknowledged_subtasks": acked}


def test_a_checkpoint_expands_to_its_operators_and_an_operator_to_its_subtasks(
        open_page: Callable[..., Any]) -> None:
    job = {**_job(), "vertices": [{"id": "v1", "name": "Source: rows"},
                                  {"id": "v2", "name": "Window -> Sink: out"}]}
    checkpoint = _checkpoint(7, "COMPLETED", T0, T0 + 2_400, 2_400, 3 * 1024 * 1024,
                             external_path="file:/tmp/chk-7", discarded=False, tasks={
                                 "v1": _task(2, T0 + 300, 300, 0),
                                 "v2": _task(1, T0 + 2_400, 2_400, 3 * 1024 * 1024)})
    subtasks = {"id": 7, "status": "COMPLETED", "subtasks": [
        {"className": "completed", "index": 0, "status": "completed", "ack_timestamp": T0 + 2_400,
         "end_to_end_duration": 2_400, "state_size": 3 * 1024 * 1024,
         "checkpointed_size": 3 * 1024 * 1024, "checkpoint": {"sync": 2_400, "async": 0},
         "alignment": {"buffered": 0, "processed": 0, "persisted": 0, "duration": 0},
         "start_delay": 0, "unaligned_checkpoint": False, "aborted": False},
        {"className": "pending", "index": 1, "status": "pending_or_failed"}]}
    details = f"jobs/{JID}/checkpoints/details/7/subtasks/v2"
    page, site = open_page({f"jobs/{JID}": job, f"jobs/{JID}/checkpoints": _stats([checkpoint]),
                            f"jobs/{JID}/checkpoints/config": _checkpoint_config(),
                            details: subtasks}, f"#/jobs/{JID}/checkpoints")
    expect(page.locator("[data-testid=checkpoint-details]")).to_have_count(0)
    page.locator("[data-testid=checkpoint-expand]").click()
    operators = page.locator("[data-testid=checkpoint-operator]")
    expect(operators).to_have_count(2)
    t = str(_module(page, "format.js", f"m.time({T0 + 2_400})"))
    assert [operators.nth(i).locator("td").all_inner_texts() for i in range(2)] == [
        ["\u25b8 Source: rows", "2/2", str(_module(page, "format.js", f"m.time({T0 + 300})")),
         "300ms", "0 B", "0 B"],
        ["\u25b8 Window -> Sink: out", "1/2", t, "2.40s", "3.00 MB", "3.00 MB"]]
    assert not any(r.startswith(f"GET {details}") for r in site.requests)  # fetched when opened

    operators.nth(1).locator("[data-testid=checkpoint-operator-expand]").click()
    rows = page.locator("[data-testid=checkpoint-subtask]")
    expect(rows).to_have_count(2)
    assert rows.nth(0).locator("td").all_inner_texts() == [
        "0", "Yes", t, "2.40s", "3.00 MB", "3.00 MB", "2.40s", "0ms", "0ms", "0ms"]
    expect(rows.nth(1)).to_have_attribute("data-status", "pending_or_failed")
    expect(rows.nth(1)).to_contain_text("Not acknowledged")
    # what is expanded survives the page's refreshes (each fetches the subtasks again)
    # (a fetch already routed may answer first, so wait for responses until a new one is routed)
    fetched = site.requests.count(f"GET {details}")
    for _ in range(20):  # 200 ms refreshes; each wait is bounded by playwright's timeout
        if site.requests.count(f"GET {details}") > fetched:
            break
        with page.expect_response(lambda response: response.url.endswith(details)):
            pass
    assert site.requests.count(f"GET {details}") > fetched, site.requests[-6:]
    expect(rows).to_have_count(2)
    page.locator("[data-testid=checkpoint-expand]").click()  # collapse the checkpoint
    expect(page.locator("[data-testid=checkpoint-operators]")).to_have_count(0)


@pytest.mark.parametrize("config", [
    _checkpoint_config(2**63 - 1),  # what flintlock answers, as Flink does
    (404, {"errors": [f"Checkpointing is not enabled for this job ({JID})."]}),  # older servers
], ids=["periodic-checkpoints-off", "not-found"])
def test_a_batch_job_says_checkpointing_is_not_enabled(open_page: Callable[..., Any],
                                                       config: Any) -> None:
    page, site = open_page({
        f"jobs/{JID}": _job("BATCH", "FINISHED"),
        f"jobs/{JID}/checkpoints": _stats([]),
        f"jobs/{JID}/checkpoints/config": config,
    }, f"#/jobs/{JID}/checkpoints")
    expect(page.locator("[data-testid=checkpointing-disabled]")).to_have_text(
        "Checkpointing is not enabled for this job.")
    expect(page.locator(".error-box")).to_have_count(0)
    expect(page.locator("[data-testid=checkpoint-history]")).to_have_count(0)
    assert f"GET jobs/{JID}/checkpoints/config" in site.requests


def test_the_job_manager_page_shows_the_leader_and_the_standbys(
        open_page: Callable[..., Any]) -> None:
    def jm(pid: int, port: int, role: str) -> dict[str, Any]:
        return {"id": f"h-{pid}-x", "host": "h", "pid": pid, "rpc-address": f"127.0.0.1:{port}",
                "started": T0, "role": role}

    page, _ = open_page({"jobmanager/high-availability": {
        "type": "ZOOKEEPER", "cluster-id": "/prod", "storage-dir": "/shared/ha",
        "leader": {"session-id": "c" * 32, "rest": "http://127.0.0.1:8082",
                   "rpc-address": "127.0.0.1:6124"},
        "jobmanagers": [jm(11, 6123, "standby"), jm(12, 6124, "leader"), jm(13, 6125, "standby")],
    }}, "#/jobmanager/ha")
    rows = page.locator("[data-testid=ha-jobmanagers] tbody tr")
    expect(rows).to_have_count(3)
    expect(page.locator("[data-testid=ha-jobmanagers] tr[data-role=leader] td").nth(1)
           ).to_have_text("127.0.0.1:6124")
    expect(page.locator("[data-testid=ha-jobmanagers] tr[data-role=standby]")).to_have_count(2)
    expect(page.locator("dl.kv")).to_contain_text("c" * 32)
    page2, _ = open_page({"jobmanager/high-availability": {
        "type": "NONE", "cluster-id": None, "storage-dir": None, "leader": None,
        "jobmanagers": []}}, "#/jobmanager/ha")
    expect(page2.locator("[data-testid=ha-none]")).to_contain_text("high-availability.type: NONE")


def test_a_recovered_job_says_how_often_a_new_leader_recovered_it(
        open_page: Callable[..., Any]) -> None:
    page, _ = open_page({f"jobs/{JID}": {**_job("BATCH"), "recoveries": 2}}, f"#/jobs/{JID}")
    expect(page.locator("[data-testid=job-recoveries]")).to_have_text("2x")
    page2, _ = open_page({f"jobs/{JID}": _job("BATCH")}, f"#/jobs/{JID}")
    expect(page2.locator("[data-testid=job-state]")).to_be_visible()
    expect(page2.locator("[data-testid=job-recoveries]")).to_have_count(0)


def test_checkpoint_failure_messages_and_paths_are_never_markup(
        open_page: Callable[..., Any]) -> None:
    history = [
        _checkpoint(2, "FAILED", T0 + 2_000, -1, 30, 0, failure_timestamp=T0 + 2_030,
                    failure_message=f"declined by Slow map (1/2): {EVIL}"),
        _checkpoint(1, "COMPLETED", T0, T0 + 40, 40, 10, external_path=f"file:/tmp/{EVIL}",
                    discarded=False),
    ]
    restored = {"id": 1, "restore_timestamp": T0 + 1_000, "is_savepoint": False,
                "external_path": f"file:/tmp/{EVIL}"}
    page, _ = open_page({f"jobs/{JID}": _job(), f"jobs/{JID}/checkpoints": _stats(
        history, restored), f"jobs/{JID}/checkpoints/config": _checkpoint_config(2**63 - 1)},
                        f"#/jobs/{JID}/checkpoints")
    expect(page.locator("[data-testid=checkpoint-failure]")).to_contain_text(
        f"declined by Slow map (1/2): {EVIL}")
    expect(page.locator("[data-testid=latest-failed]")).to_contain_text(EVIL)
    expect(page.locator("[data-testid=checkpoint-row]").nth(1)).to_contain_text(
        f"file:/tmp/{EVIL}")
    expect(page.locator("[data-testid=latest-restored]")).to_contain_text(f"file:/tmp/{EVIL}")
    expect(page.locator("[data-config=interval]")).to_have_text("Periodic checkpoints disabled")
    assert page.locator("img[src=x]").count() == 0
    assert page.evaluate("window.pwned") is None


def test_log_pages_are_whole_lines_at_exact_byte_offsets(open_page: Callable[..., Any]) -> None:
    text = "".join(f"line {i:03d} ünïcödé\n" for i in range(20_000)).encode()
    size = len(text)

    def log(key: str) -> Answer:
        query = dict(p.split("=") for p in key.split("?", 1)[1].split("&"))
        start, count = int(query["start"]), int(query["count"])
        first = max(0, size + start) if start < 0 else min(start, size)
        chunk = text[first:first + count]
        return 200, chunk, {"X-Log-Size": str(size), "X-Log-Start": str(first),
                            "X-Log-End": str(first + len(chunk))}

    page, _ = open_page({"taskmanagers/tm-1/logs/task.log": log},
                        "#/logs/taskmanager/tm-1/task.log")
    content = page.locator("[data-testid=log-content]")
    expect(content).to_contain_text("line 19999 ünïcödé")  # the tail first
    last_page = content.inner_text()
    assert last_page.split("\n")[0].startswith("line ")  # starts on a whole line
    page.click("text=‹ Prev")
    expect(content).not_to_contain_text("line 19999")
    previous_page = content.inner_text()
    # consecutive pages meet exactly: the previous page ends with the line before the tail's first
    first_of_last = int(last_page.split("\n")[0].split()[1])
    assert previous_page.rstrip("\n").split("\n")[-1] == f"line {first_of_last - 1:03d} ünïcödé"
    page.click("text=« First")
    expect(content).to_contain_text("line 000 ünïcödé")
    expect(page.locator("[data-testid=log-download]")).to_have_attribute(
        "href", "taskmanagers/tm-1/logs/task.log?download=1")
