"""``mount_web_ui``: the dashboard's routes next to the REST API (no browser, no cluster)."""

from __future__ import annotations

import fnmatch
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from flintlock.config import Configuration
from flintlock.runtime.rest import create_app
from flintlock.runtime.rest import web as web_ui

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=".*httpx2.*")
    from starlette.testclient import TestClient

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def client() -> Iterator[Any]:
    app = create_app(object(), Configuration({"web.refresh-interval": "1500 ms"}),  # type: ignore[arg-type]
                     secret=None)
    with TestClient(app, base_url="http://localhost") as c:
        yield c


def test_dashboard_is_served_at_root_with_its_assets(client: Any) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert '<script type="module" src="web/js/app.js">' in page.text
    app_js = client.get("/web/js/app.js")
    assert app_js.status_code == 200 and "javascript" in app_js.headers["content-type"]
    assert "frame-ancestors 'none'" in app_js.headers["content-security-policy"]
    assert client.get("/web/style.css").headers["content-type"].startswith("text/css")


def test_api_routes_keep_working_and_errors_stay_flink_shaped(client: Any) -> None:
    for path in ("/config", "/v1/config"):
        assert client.get(path).json()["refresh-interval"] == 1500
    missing = client.get("/web/js/nope.js")
    assert missing.status_code == 404 and missing.json()["errors"]
    # nothing outside the static folder (here: the package's own __init__.py next to it)
    assert client.get("/web/%2e%2e/__init__.py").status_code == 404
    assert client.get("/web/..%2f__init__.py").status_code == 404
    assert client.post("/").status_code == 405


def test_every_static_file_is_package_data() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["flintlock"]
    package = web_ui.STATIC_DIR.parents[3]  # flintlock/
    files = [p.relative_to(package).as_posix() for p in web_ui.STATIC_DIR.rglob("*") if p.is_file()]
    assert files and "runtime/rest/web/static/js/app.js" in files
    unpackaged = [f for f in files if not any(fnmatch.fnmatchcase(f, pat) and
                                              f.count("/") == pat.count("/") for pat in patterns)]
    assert not unpackaged, f"add these to [tool.setuptools.package-data]: {unpackaged}"


def test_missing_static_files_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(web_ui, "STATIC_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="web UI files missing"):
        web_ui.mount_web_ui(FastAPI(), Configuration())
