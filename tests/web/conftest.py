"""Browser tests of the web dashboard: a session cluster (``flintlock cluster start``, 1
TaskManager x 2 slots) and Debian's chromium driven by Playwright.

Chromium is never downloaded: the tests launch ``/usr/bin/chromium`` (``apt-get install
chromium``; ``.ci/run`` installs it). Without it the tests are skipped, except in CI (``CI=true``),
where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web_cluster import CHROMIUM, launch_chromium, web_cluster_state


def require_chromium() -> None:
    """Skip (or, in CI, fail) when Debian's chromium or the playwright package is missing."""
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright package (pip install -e '.[test]')")
    if missing:
        reason = "browser tests need " + " and ".join(missing)
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + " — CI must provide it", pytrace=False)
        pytest.skip(reason)


def flink_dashboard_home() -> Path | None:
    """The FLINK_HOME whose flink-dist jar holds Apache Flink's dashboard (``flink_home``
    downloads it once per checkout); None when PyPI cannot be reached (outside CI)."""
    from flink_home import flink_home

    try:
        return flink_home()
    except pytest.skip.Exception as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must be able to download Apache Flink's dashboard: {exc}", pytrace=False)
        return None


@pytest.fixture(scope="session")
def web_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    require_chromium()
    yield from web_cluster_state(tmp_path_factory.mktemp("web-cluster"),
                                 flink_dashboard=flink_dashboard_home())


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = launch_chromium(pw)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any, web_cluster: dict[str, Any]) -> Iterator[Any]:
    """A fresh page on the cluster's dashboard origin; fails the test on any uncaught JS error
    or Content-Security-Policy violation."""
    context = browser.new_context(base_url=web_cluster["rest"],
                                  viewport={"width": 1400, "height": 900})
    context.set_default_timeout(30_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda msg: errors.append(msg.text)
          if "Content Security Policy" in msg.text else None)
    try:
        yield pg
    finally:
        context.close()
    assert not errors, f"JavaScript errors or CSP violations in the dashboard: {errors}"
