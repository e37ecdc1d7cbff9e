"""Apache Flink's own dashboard at /flink/ (``web.flink-dashboard.path``): files from a flink-dist
jar, a FLINK_HOME or a directory, the REST API under /flink/ as the dashboard calls it, clear
errors for paths that hold no dashboard."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from flintlock.runtime.rest.web.flink_dashboard import open_dashboard

INDEX = b"<html><base href='./'><script src='main.1.js' type='module'></script></html>"
MAIN = b"const BASE_URL='.';"


def _flink_dist(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr("org/apache/flink/Dummy.class", b"\xca\xfe")
        jar.writestr("web/", b"")
        jar.writestr("web/index.html", INDEX)
        jar.writestr("web/main.1.js", MAIN)
        jar.writestr("web/assets/favicon/favicon.ico", b"ico")
    return path


@pytest.fixture
def flink_home(tmp_path: Path) -> Path:
    _flink_dist(tmp_path / "flink" / "lib" / "flink-dist-2.1.1.jar")
    return tmp_path / "flink"


def test_a_flink_home_serves_the_jars_web_folder_at_flink(make_rest, flink_home):
    rest = make_rest({"web.flink-dashboard.path": str(flink_home)})
    page = rest.client.get("/flink/")
    assert page.status_code == 200 and page.content == INDEX
    assert page.headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    script = rest.client.get("/flink/main.1.js")
    assert script.content == MAIN and script.headers["content-type"].startswith("text/javascript")
    assert script.headers["x-content-type-options"] == "nosniff"
    assert rest.client.get("/flink/assets/favicon/favicon.ico").content == b"ico"
    redirect = rest.client.get("/flink", follow_redirects=False)
    assert redirect.status_code == 307 and redirect.headers["location"] == "/flink/"
    # files outside web/ are not served, and neither is anything under ../ (%2e%2e: a client
    # would resolve a literal ..)
    for path in ("/flink/org/apache/flink/Dummy.class", "/flink/%2e%2e/org/apache/flink/Dummy.class",
                 "/flink/web/index.html", "/flink/nope.js"):
        answer = rest.client.get(path)
        assert answer.status_code == 404, (path, answer.status_code)
        assert "errors" in answer.json()


def test_the_rest_api_answers_under_flink_as_the_dashboard_calls_it(make_rest, flink_home):
    rest = make_rest({"web.flink-dashboard.path": str(flink_home)})
    rest.on("request_multiple_job_details", lambda: [])
    for path in ("/config", "/jobs/overview"):
        direct, proxied = rest.client.get(path), rest.client.get("/flink" + path)
        assert proxied.status_code == direct.status_code == 200, (path, proxied.text)
        assert proxied.json() == direct.json()
    # the same checks apply: a state-changing call still needs the secret
    assert rest.client.delete("/flink/cluster").status_code == 401
    assert rest.client.get("/flink/jobs/overview", headers={"Host": "evil.example"}).status_code == 400
    # and the OpenAPI document lists each path once, without /flink
    paths = rest.client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/flink")]


def test_a_jar_path_and_an_unpacked_web_folder_are_served_too(make_rest, tmp_path):
    jar = _flink_dist(tmp_path / "dist" / "flink-dist-2.1.1.jar")
    assert make_rest({"web.flink-dashboard.path": str(jar)}).client.get("/flink/").content == INDEX
    web = tmp_path / "unpacked" / "web"
    (web / "assets").mkdir(parents=True)
    (web / "index.html").write_bytes(INDEX)
    (web / "assets" / "a.css").write_bytes(b"body{}")
    (tmp_path / "unpacked" / "secret.txt").write_text("not served")
    rest = make_rest({"web.flink-dashboard.path": str(web.parent)})
    assert rest.client.get("/flink/").content == INDEX
    assert rest.client.get("/flink/assets/a.css").headers["content-type"].startswith("text/css")
    assert rest.client.get("/flink/%2e%2e/secret.txt").status_code == 404


def test_without_the_option_nothing_is_served_at_flink(rest):
    assert rest.client.get("/flink/").status_code == 404
    assert rest.client.get("/flink/jobs/overview").status_code == 404


@pytest.mark.parametrize("make, expected", [
    (lambda d: d / "missing", "does not exist"),
    (lambda d: d, "holds neither index.html"),
    (lambda d: (d / "x.jar").write_bytes(b"not a zip") and d / "x.jar", "is not a jar"),
    (lambda d: _empty_jar(d / "empty.jar"), "has no web/index.html"),
])
def test_a_path_without_a_dashboard_is_a_clear_error(tmp_path, make, expected):
    with pytest.raises(ValueError, match=expected) as info:
        open_dashboard(str(make(tmp_path)))
    assert "web.flink-dashboard.path" in str(info.value)


def test_the_app_refuses_to_start_with_a_wrong_path(make_rest, tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        make_rest({"web.flink-dashboard.path": str(tmp_path / "nope")})


def _empty_jar(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\n")
    return path
