"""``POST /jobs/:jobid/coordinators/:operatorid``: a STREAMING job's collect results over REST."""

from __future__ import annotations

from typing import Any

from conftest import SECRET, RestHarness

from flintlock.runtime.ids import JobID

JOB = "a" * 32
URL = f"/v1/jobs/{JOB}/coordinators/collect-sink-1"
AUTH = {"Authorization": f"Bearer {SECRET}"}


def _answer(job_id: JobID, operator_id: str, request: dict[str, Any]) -> dict[str, Any]:
    if request["offset"] > 2:
        raise ValueError("collect offset 3 is outside the batches handed out (0..2)")
    return {"offset": request["offset"], "batches": ["AAE="], "end": False, "failure": "",
            "jobStatus": "RUNNING"}


def test_a_collect_request_reaches_the_dispatcher(rest: RestHarness) -> None:
    rest.on("deliver_coordination_request", _answer)
    response = rest.client.post(URL, json={"offset": 1}, headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.json() == {"offset": 1, "batches": ["AAE="], "end": False, "failure": "",
                               "jobStatus": "RUNNING"}
    (call,) = rest.calls("deliver_coordination_request")
    assert call.args == (JobID.from_hex(JOB), "collect-sink-1", {"offset": 1})


def test_collect_requests_need_the_secret_and_a_valid_offset(rest: RestHarness) -> None:
    rest.on("deliver_coordination_request", _answer)
    denied = rest.client.post(URL, json={"offset": 0})
    assert denied.status_code == 401
    assert "Fetching a job's collected rows requires the header" in denied.json()["errors"][0]
    assert rest.client.post(URL, json={"offset": -1}, headers=AUTH).status_code == 400
    assert rest.client.post(URL, json={}, headers=AUTH).status_code == 400
    outside = rest.client.post(URL, json={"offset": 3}, headers=AUTH)
    assert outside.status_code == 400 and "outside the batches" in outside.json()["errors"][0]
    assert not [c for c in rest.calls("deliver_coordination_request") if c.args[2]["offset"] < 3]
