"""Web submission endpoints: upload/list/delete, authentication, validation, web.submit.enable.

Running a program end to end (it submits a job that finishes) is in
``tests/process/test_logs_metrics.py``; here the run handler's input checks and a program that
fails before submitting anything.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flintlock.runtime.rest.jar_runner import parse_run_request

SECRET = "s3cret-token"  # the harness's secret (conftest.SECRET)
AUTH = {"Authorization": f"Bearer {SECRET}"}
PROGRAM = b"print('hello')\n"


@pytest.fixture
def web(make_rest, tmp_path: Path):
    return make_rest({"web.upload.dir": str(tmp_path)})


def _upload(h, name: str = "wordcount.py", data: bytes = PROGRAM, headers=AUTH):
    return h.client.post("/jars/upload", files={"jarfile": (name, data, "text/x-python")},
                         headers=headers)


def test_upload_list_delete(web, tmp_path: Path):
    r = _upload(web)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "success"
    stored = Path(body["filename"])
    assert stored.parent == tmp_path / "flintlock-web-upload"
    assert re.fullmatch(r"[0-9a-f]{32}_wordcount\.py", stored.name)
    assert stored.read_bytes() == PROGRAM
    listing = web.client.get("/v1/jars").json()
    assert listing["address"].startswith("http://")
    (entry,) = listing["files"]
    assert (entry["id"], entry["name"]) == (stored.name, "wordcount.py")
    assert entry["uploaded"] > 1_600_000_000_000 and entry["entry"][0]["name"] == "wordcount.py"
    assert web.client.delete(f"/jars/{stored.name}", headers=AUTH).json() == {}
    assert not stored.exists()
    assert web.client.get("/jars").json()["files"] == []
    assert web.client.delete(f"/jars/{stored.name}", headers=AUTH).status_code == 404


def test_upload_run_and_delete_need_the_secret(web):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {SECRET}"}):
        r = _upload(web, headers=headers)
        assert r.status_code == 401, r.text
        assert "Bearer" in r.json()["errors"][0]
    jar_id = _upload(web).json()["filename"].rsplit("/", 1)[1]
    assert web.client.post(f"/jars/{jar_id}/run", json={}).status_code == 401
    assert web.client.delete(f"/jars/{jar_id}").status_code == 401


@pytest.mark.parametrize(("name", "data", "message"), [
    ("job.jar", b"PK\x03\x04", "does not end with '.py'"),
    ("job.py", b"   \n", "is empty"),
    ("job.py", b"\xff\xfe\x00binary", "not UTF-8"),
])
def test_upload_rejects_non_programs(web, name, data, message):
    r = _upload(web, name, data)
    assert r.status_code == 400
    assert message in r.json()["errors"][0]


def test_upload_file_name_cannot_escape_the_upload_dir(web, tmp_path: Path):
    r = _upload(web, "../../../../tmp/evil name.py")
    stored = Path(r.json()["filename"])
    assert stored.parent == tmp_path / "flintlock-web-upload"
    assert stored.name.endswith("_evil_name.py")


def test_upload_without_the_file_field_and_oversized(make_rest, tmp_path: Path):
    h = make_rest({"web.upload.dir": str(tmp_path), "rest.server.max-content-length": "1k"})
    r = h.client.post("/jars/upload", files={"other": ("a.py", PROGRAM)}, headers=AUTH)
    assert r.status_code == 400 and "jarfile" in r.json()["errors"][0]
    r = _upload(h, data=b"x = 1\n" * 1000)
    assert r.status_code == 413


@pytest.mark.parametrize("jar_id", ["..%2F..%2Fetc%2Fpasswd", "x.py",
                                    "0123456789abcdef0123456789abcdef_missing.py"])
def test_unknown_or_malformed_jar_ids(web, jar_id):
    r = web.client.post(f"/jars/{jar_id}/run", json={}, headers=AUTH)
    assert r.status_code == 404, r.text
    assert web.calls("submit_job") == []


def test_web_submit_disabled(make_rest, tmp_path: Path):
    h = make_rest({"web.upload.dir": str(tmp_path), "web.submit.enable": "false"})
    assert h.client.get("/config").json()["features"]["web-submit"] is False
    for response in (h.client.get("/jars"), _upload(h),
                     h.client.post("/jars/0123456789abcdef0123456789abcdef_a.py/run", json={},
                                   headers=AUTH),
                     h.client.delete("/jars/0123456789abcdef0123456789abcdef_a.py",
                                     headers=AUTH)):
        assert response.status_code == 403
        assert "web.submit.enable" in response.json()["errors"][0]
    assert not (tmp_path / "flintlock-web-upload").exists()


def test_run_request_parsing():
    r = parse_run_request({"programArgsList": ["--in", "a b"], "parallelism": 3,
                           "flinkConfiguration": {"pipeline.name": "x", "a.b": True},
                           "entryClass": "ignored"})
    assert (r.program_args, r.parallelism) == (("--in", "a b"), 3)
    assert r.configuration == {"pipeline.name": "x", "a.b": "true"}
    assert parse_run_request({"programArgs": "--in 'a b' -v"}).program_args == ("--in", "a b", "-v")
    assert parse_run_request(None, "x,y", 2).program_args == ("x", "y")
    for bad in ({"parallelism": 0}, {"parallelism": "2"}, {"programArgsList": "x"},
                {"flinkConfiguration": {"-Dx": "1"}}, {"programArgs": "'open"},
                {"flinkConfiguration": {"security.cluster.secret": "s"}}, []):
        with pytest.raises(ValueError):
            parse_run_request(bad)


def test_run_rejects_bad_bodies(web):
    jar_id = _upload(web).json()["filename"].rsplit("/", 1)[1]
    r = web.client.post(f"/jars/{jar_id}/run", content=b"{not json", headers=AUTH)
    assert r.status_code == 400 and "not JSON" in r.json()["errors"][0]
    r = web.client.post(f"/jars/{jar_id}/run", json={"parallelism": -1}, headers=AUTH)
    assert r.status_code == 400 and "parallelism" in r.json()["errors"][0]


def test_run_of_a_program_that_submits_nothing_reports_its_output(web):
    jar_id = _upload(web, "broken.py", b"raise SystemExit('no input file given')\n").json()[
        "filename"].rsplit("/", 1)[1]
    r = web.client.post(f"/jars/{jar_id}/run", json={"programArgsList": []}, headers=AUTH)
    assert r.status_code == 400, r.text
    message = r.json()["errors"][0]
    assert "'broken.py' exited with code 1 without submitting a job" in message
    assert "no input file given" in message
    assert web.calls("submit_job") == []
