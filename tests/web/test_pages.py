"""The dashboard's pages and pure JS helpers in chromium, against canned REST answers (no cluster).

Playwright serves the packaged static files (with their Content-Security-Policy) and answers the
REST calls from a dict, so these tests are fast and can stage what a cluster rarely shows: hostile
names, failing endpoints, byte-exact log pages.
"""

from __future__ import annotations

import json
import mimetypes
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
    state = {"fail": False}

    def overview(_: str) -> Answer:
        if state["fail"]:
            return 503, {"errors": ["dispatcher unreachable"]}
        return {"taskmanagers": 3, "slots-total": 6, "slots-available": 6, "jobs-running": 0,
                "jobs-finished": 0, "jobs-failed": 0, "jobs-cancelled": 0}

    page, _ = open_page({"overview": overview, "jobs/overview": {"jobs": []},
                         "taskmanagers": (500, {"errors": ["TaskManager registry broken"]})})
    expect(page.locator('[data-stat="Task Managers"] .stat-value')).to_have_text("3")
    state["fail"] = True  # the next refresh fails: the last good page stays, with a banner
    expect(page.locator("#error-banner")).to_contain_text("HTTP 503: dispatcher unreachable")
    expect(page.locator('[data-stat="Task Managers"] .stat-value')).to_have_text("3")
    state["fail"] = False
    expect(page.locator("#error-banner")).to_be_hidden()

    page.click("#nav a[data-nav=taskmanagers]")  # a page that cannot load says why
    expect(page.locator(".error-box")).to_contain_text("HTTP 500")
    expect(page.locator(".error-box")).to_contain_text("TaskManager registry broken")


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
