"""A standby JobManager's REST: every request redirected to the leader (307: method and body
kept), 503 with Retry-After while no leader is known."""

from __future__ import annotations

from starlette.testclient import TestClient

from flintlock.runtime.rest.standby import create_standby_app


def test_requests_are_redirected_to_the_leader_or_told_to_retry() -> None:
    leader: list[str | None] = [None]
    client = TestClient(create_standby_app(lambda: leader[0]), follow_redirects=False)
    waiting = client.get("/v1/overview")
    assert waiting.status_code == 503 and waiting.headers["retry-after"] == "1"
    assert "stands by" in waiting.json()["errors"][0]
    leader[0] = "http://10.0.0.7:8081"
    moved = client.post("/v1/jobs/abc/stop?drain=true", json={"drain": True})
    assert moved.status_code == 307
    assert moved.headers["location"] == "http://10.0.0.7:8081/v1/jobs/abc/stop?drain=true"
    assert client.get("/").headers["location"] == "http://10.0.0.7:8081/"
