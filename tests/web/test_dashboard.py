"""The dashboard in a real browser against a session cluster (STYLE layer 4: separate processes,
talked to only through the page, the CLI and REST)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_helpers import wait_for_job_state
from programs import SLOW_KEYED_PROGRAM
from web_cluster import submit_detached

try:
    from playwright.sync_api import expect
except ImportError:  # the fixtures skip (or fail in CI) with the reason
    expect = None

pytestmark = [pytest.mark.web, pytest.mark.process, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.timeout(300)]

def submit(cluster: dict[str, Any], tmp_path: Path, name: str, rows: int,
           fail_at: int | None = None, options: tuple[str, ...] = ()) -> str:
    return submit_detached(cluster, tmp_path, name, rows, fail_at, options)


def vertices(cluster: dict[str, Any], job_id: str) -> list[dict[str, Any]]:
    return list(httpx.get(f"{cluster['rest']}/v1/jobs/{job_id}").json()["vertices"])


def test_overview_taskmanagers_and_jobmanager_pages(page: Any, web_cluster: dict[str, Any]) -> None:
    page.goto("/")
    expect(page.locator("#page-title")).to_have_text("Overview")
    expect(page.locator('[data-stat="Task Managers"] .stat-value')).to_have_text("1")
    expect(page.locator('[data-stat="Total Task Slots"] .stat-value')).to_have_text("2")
    expect(page.locator("#version")).to_contain_text("Version")

    page.click("#nav a[data-nav=taskmanagers]")
    tm_link = page.locator("[data-testid=taskmanagers] tbody tr td a").first
    expect(tm_link).to_be_visible()
    tm_id = tm_link.inner_text()
    assert tm_id == httpx.get(f"{web_cluster['rest']}/taskmanagers").json()["taskmanagers"][0]["id"]
    tm_link.click()
    expect(page.locator("[data-testid=taskmanager-page]")).to_contain_text("2 free of 2")
    page.click(".tabs >> text=Logs")
    expect(page.locator("[data-testid=log-files]")).to_be_visible()

    page.click("#nav a[data-nav=jobmanager]")
    config = page.locator("[data-testid=jm-config]")
    expect(config).to_contain_text("web.refresh-interval")
    expect(config).to_contain_text("rest.port")


def test_follow_a_running_job_to_finished(page: Any, web_cluster: dict[str, Any],
                                          tmp_path: Path) -> None:
    # two tasks with an exchange between them, whose records the page shows (on this cluster's
    # one Spark server the whole job would otherwise run as one task)
    job_id = submit(web_cluster, tmp_path, "web-follow", 200, options=(
        "-D", "execution.batch.adaptive.runtime-chaining.whole-job.enabled=false"))
    page.goto("/#/jobs/running")
    row = page.locator(f"[data-testid=running-jobs] tr[data-jid='{job_id}']")
    expect(row).to_be_visible()  # seen while it runs
    row.locator("a.job-link").click()
    expect(page).to_have_url(re.compile(f"#/jobs/{job_id}$"))

    nodes = page.locator("[data-testid=job-graph] g.dag-node")
    expect(nodes).to_have_count(len(vertices(web_cluster, job_id)))
    assert len(vertices(web_cluster, job_id)) == 2
    states_seen = {nodes.nth(i).get_attribute("data-state") for i in range(2)}
    assert states_seen - {"FINISHED"}, f"the job had already finished: {states_seen}"
    expect(page.locator("[data-testid=job-graph] .dag-edge").first).to_have_attribute(
        "data-ship-strategy", "HASH")
    for i in range(2):
        expect(nodes.nth(i)).to_have_attribute("data-state", "FINISHED", timeout=120_000)
    expect(page.locator("[data-testid=job-state] .badge")).to_have_text("FINISHED")

    source, keyed = sorted(vertices(web_cluster, job_id), key=lambda v: "Slow map" not in v["name"])
    records_out = f"[data-testid=vertices] tr[data-vertex-id='{source['id']}'] " \
                  "[data-metric=write-records]"
    records_in = f"[data-testid=vertices] tr[data-vertex-id='{keyed['id']}'] " \
                 "[data-metric=read-records]"
    # 7 keys (id % 7), pre-aggregated before the exchange; counts are known once FINISHED
    expect(page.locator(records_out)).to_have_text("7")
    expect(page.locator(records_in)).to_have_text("7")
    expect(page.locator("[data-testid=vertices] .progress-label").first).to_have_text("1/1")

    nodes.first.click()
    subtask = page.locator("[data-testid=subtasks] tbody tr").first
    expect(subtask).to_have_attribute("data-state", "FINISHED")
    subtask.locator("a.log-link").click()
    expect(page.locator("[data-testid=log-name]")).to_contain_text(f"task-{job_id}-")
    expect(page.locator("[data-testid=log-content]")).to_contain_text("FINISHED")

    page.goto("/#/jobs/completed")
    expect(page.locator(f"[data-testid=completed-jobs] tr[data-jid='{job_id}']")).to_contain_text(
        "FINISHED")


def test_failed_subtask_log_is_one_click_from_the_exception_history(
        page: Any, web_cluster: dict[str, Any], tmp_path: Path) -> None:
    job_id = submit(web_cluster, tmp_path, "web-fail", 50, fail_at=25,
                    options=("-D", "restart-strategy.type=none"))
    wait_for_job_state(web_cluster, job_id, "FAILED", 120)
    page.goto(f"/#/jobs/{job_id}/exceptions")
    entry = page.locator("[data-testid=exception-entry]").first
    expect(entry).to_contain_text("ValueError")
    expect(entry).to_contain_text("web-ui-boom at row 25")
    entry.locator("[data-testid=exception-log]").click()
    expect(page).to_have_url(re.compile(r"#/logs/taskmanager/.+/task-" + job_id))
    expect(page.locator("[data-testid=log-content]")).to_contain_text("web-ui-boom at row 25")
    expect(page.locator("[data-testid=log-download]")).to_have_attribute(
        "href", re.compile(r"^taskmanagers/.+/logs/task-.+\?download=1$"))


def test_cancel_a_running_job_with_the_button(page: Any, web_cluster: dict[str, Any],
                                              tmp_path: Path) -> None:
    job_id = submit(web_cluster, tmp_path, "web-cancel", 20_000)
    page.goto(f"/#/jobs/{job_id}")
    expect(page.locator("[data-testid=job-state] .badge")).to_have_text("RUNNING", timeout=60_000)
    page.click("[data-testid=cancel-job]")
    page.click("[data-testid=confirm-cancel]")
    expect(page.locator("[data-testid=job-state] .badge")).to_have_text("CANCELED")
    expect(page.locator("[data-testid=cancel-job]")).to_have_count(0)
    assert httpx.get(f"{web_cluster['rest']}/jobs/{job_id}/status").json() == {"status": "CANCELED"}


def test_submit_a_program_from_the_submit_page(page: Any, web_cluster: dict[str, Any],
                                               tmp_path: Path) -> None:
    prog = tmp_path / "web_submitted.py"
    prog.write_text(SLOW_KEYED_PROGRAM)
    name = "<b>web-submitted</b>"  # shown as text, never as markup
    page.goto("/#/submit")
    page.fill("[data-testid=cluster-secret]", web_cluster["secret"])
    page.set_input_files("[data-testid=upload-file]", str(prog))
    page.click("[data-testid=upload]")
    expect(page.locator("[data-testid=jars]")).to_contain_text("web_submitted.py")
    page.fill("[data-testid=program-args]", f"{tmp_path / 'out'} 20 '{name}'")
    page.fill("[data-testid=parallelism]", "1")
    page.click("[data-testid=run]")
    expect(page).to_have_url(re.compile(r"#/jobs/[0-9a-f]{32}$"), timeout=120_000)
    job_id = page.url.rsplit("/", 1)[-1]
    expect(page.locator("[data-testid=job-name]")).to_have_text(name)
    assert page.locator("[data-testid=job-name] b").count() == 0

    page.click("#nav a[data-nav='jobs/completed']")
    row = page.locator(f"[data-testid=completed-jobs] tr[data-jid='{job_id}']")
    expect(row).to_contain_text("FINISHED", timeout=120_000)
    expect(row).to_contain_text(name)


def test_api_errors_are_shown(page: Any, web_cluster: dict[str, Any]) -> None:
    page.goto("/#/jobs/" + "0" * 32)
    error = page.locator(".error-box")
    expect(error).to_contain_text("HTTP 404")
    expect(error).to_contain_text("0" * 32)
    page.goto("/#/no-such-page")
    expect(page.locator(".error-box")).to_contain_text("No page at #/no-such-page")
