"""Absurd ``Range`` headers, internal errors without tracebacks, HEAD on GET routes (issue 16,
defect 5)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from flintlock.runtime.ids import ResourceID
from flintlock.runtime.logs import LogDirectory
from flintlock.runtime.logs.files import MAX_LOG_CHUNK_BYTES
from flintlock.runtime.rest import errors
from flintlock.runtime.rest.head import HeadAsGetMiddleware

TM = "127.0.0.1:40123-abcdef"
HUGE = "9" * 5000  # int() refuses more than 4300 digits
URL = f"/taskmanagers/{TM}/logs/task-a.log"


@pytest.fixture
def tm_logs(rest, tmp_path: Path):
    """The harness serves one TaskManager's logs: ``task-a.log`` (10 bytes), ``empty.log``,
    ``big.log`` (several chunks); HEAD is installed on the app."""
    logs = LogDirectory(tmp_path / "tm")
    logs.register("task-a.log").write_bytes(b"0123456789")
    logs.register("empty.log").write_bytes(b"")
    logs.register("big.log").write_bytes(b"x" * (2 * MAX_LOG_CHUNK_BYTES + 5))

    def read(resource_id: ResourceID, name, start, count):
        assert str(resource_id) == TM
        return logs.read(name, start, count)

    rest.on("request_task_manager_log", read)
    rest.on("request_task_manager_log_list", lambda _rid: logs.list_logs())
    _install_head(rest.client.app)
    return rest


def _install_head(app) -> None:
    """``app.add_middleware(HeadAsGetMiddleware)`` unless ``create_app`` already did."""
    if not any(m.cls is HeadAsGetMiddleware for m in app.user_middleware):
        app.add_middleware(HeadAsGetMiddleware)


@pytest.mark.parametrize(("header", "status", "content", "content_range"), [
    (f"bytes={HUGE}-", 416, b"", "bytes */10"),
    (f"bytes={HUGE}-{HUGE}", 416, b"", "bytes */10"),
    (f"bytes=10-{HUGE}", 416, b"", "bytes */10"),
    ("bytes=-0", 416, b"", "bytes */10"),
    (f"bytes=3-{HUGE}", 206, b"3456789", "bytes 3-9/10"),
    (f"bytes=-{HUGE}", 206, b"0123456789", "bytes 0-9/10"),
    (f"bytes={'0' * 5000}2-{'0' * 5000}4", 206, b"234", "bytes 2-4/10"),
])
def test_absurd_range_positions_are_answered_without_errors(tm_logs, caplog, header, status,
                                                            content, content_range):
    with caplog.at_level(logging.WARNING):
        r = tm_logs.client.get(URL, headers={"Range": header})
    assert (r.status_code, r.content, r.headers["content-range"]) == (status, content,
                                                                      content_range)
    assert [rec for rec in caplog.records if rec.levelno >= logging.ERROR] == []


@pytest.mark.parametrize("header", [f"bytes=5-{'0' * 5000}3", "bytes=0-1,3-4", f"items={HUGE}-",
                                    "bytes=-", f"bytes={HUGE}"])
def test_malformed_ranges_are_400_without_a_traceback(tm_logs, header):
    r = tm_logs.client.get(URL, headers={"Range": header})
    assert r.status_code == 400, r.text
    assert "invalid Range header" in r.json()["errors"][0]
    assert "Traceback" not in r.text


def test_a_range_of_an_empty_file_is_not_satisfiable(tm_logs):
    r = tm_logs.client.get(f"/taskmanagers/{TM}/logs/empty.log", headers={"Range": "bytes=0-"})
    assert (r.status_code, r.headers["content-range"]) == (416, "bytes */0")
    r = tm_logs.client.get(f"/taskmanagers/{TM}/logs/empty.log", headers={"Range": "bytes=-5"})
    assert (r.status_code, r.content) == (206, b"")


# ---- internal errors -------------------------------------------------------------------------


@pytest.fixture
def fresh_error_log(monkeypatch):
    """A fresh record of the internal errors already logged (it is process-wide)."""
    monkeypatch.setattr(errors, "_INTERNAL_ERRORS", errors._InternalErrorLog())


def test_internal_errors_carry_no_traceback_and_are_logged_once(rest, caplog, fresh_error_log):
    def broken():
        raise RuntimeError("dispatcher bug\nsecond line of the message")

    rest.on("list_jobs", broken)
    with caplog.at_level(logging.ERROR, logger="flintlock.runtime.rest.errors"):
        responses = [rest.client.get("/v1/jobs") for _ in range(5)]
    for r in responses:
        assert r.status_code == 500
        assert r.json()["errors"] == [
            "Internal server error.",
            "<Exception on server side: RuntimeError: dispatcher bug (the traceback is in the "
            "JobManager log)>"]
        assert "Traceback" not in r.text and ".py" not in r.text
    records = [rec for rec in caplog.records if rec.name == "flintlock.runtime.rest.errors"]
    assert len(records) == 1
    assert records[0].exc_info is not None and "dispatcher bug" in str(records[0].exc_info[1])


def test_the_internal_error_log_rate_limits_repeats_per_kind(caplog):
    now = [1000.0]
    error_log = errors._InternalErrorLog(repeat_interval_s=60.0, clock=lambda: now[0])

    def fail(line: int) -> None:
        try:
            if line == 1:
                raise ValueError("first site")
            raise ValueError("second site")
        except ValueError as exc:
            error_log.report(exc, "/v1/jobs/\nforged log line")

    with caplog.at_level(logging.ERROR, logger="flintlock.runtime.rest.errors"):
        for _ in range(4):
            fail(1)
        fail(2)  # another raising line: another kind, with its traceback
        now[0] += 61.0
        fail(1)
    messages = [(rec.getMessage(), rec.exc_info is not None) for rec in caplog.records]
    assert len(messages) == 3
    assert messages[0][1] and messages[1][1] and not messages[2][1]
    assert "'/v1/jobs/\\nforged log line'" in messages[0][0]  # the path, escaped
    assert "second site" in str(caplog.records[1].exc_info[1])
    assert re.search(r": ValueError: first site at .*\.py:\d+ \(3 more of this kind", messages[2][0])


# ---- HEAD ------------------------------------------------------------------------------------


def test_head_answers_with_the_headers_of_get_and_no_body(tm_logs):
    client = tm_logs.client
    for url, headers in ((URL, {}), (URL, {"Range": "bytes=2-4"}),
                         (f"/taskmanagers/{TM}/logs/big.log", {}), ("/v1/config", {}),
                         ("/jobs/overview", {})):
        get = client.get(url, headers=headers)
        head = client.head(url, headers=headers)
        assert head.status_code == get.status_code, url
        assert head.content == b"", url
        assert {k: v for k, v in head.headers.items() if k != "date"} == {
            k: v for k, v in get.headers.items() if k != "date"}, url
    head = client.head(URL)
    assert (head.headers["content-length"], head.headers["x-log-size"]) == ("10", "10")
    assert client.head("/v1/no-such-path").status_code == 404
    assert client.head("/v1/jobs/overview").status_code == 200


def test_every_get_route_answers_head(tm_logs):
    """HEAD gets the status GET gets on every GET path of the OpenAPI document (path parameters
    filled with ids), with and without the /v1 prefix."""
    fill = {"jobid": "0" * 32, "vertexid": "0" * 32, "taskmanagerid": TM, "subtaskindex": "0",
            "attempt": "0", "checkpointid": "1", "triggerid": "0" * 32, "jarid": "x.py",
            "filename": "task-a.log", "operatorId": "0" * 32}
    paths = [p for p, ops in tm_logs.client.get("/openapi.json").json()["paths"].items()
             if "get" in ops]
    assert len(paths) > 40
    for template in paths:
        path = re.sub(r"\{(\w+)(:\w+)?\}", lambda m: fill.get(m.group(1), "x"), template)
        for url in (path, path.removeprefix("/v1")):
            get = tm_logs.client.get(url)
            head = tm_logs.client.head(url)
            assert (head.status_code, head.content) == (get.status_code, b""), url
            assert head.status_code != 405, url
