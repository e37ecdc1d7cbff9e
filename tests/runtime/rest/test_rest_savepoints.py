"""``POST /jobs/:jobid/savepoints``, ``GET /jobs/:jobid/savepoints/:triggerid`` and
``POST /jobs/:jobid/stop`` against a testing Dispatcher: the secret, Flink's bodies and answers."""

from __future__ import annotations

import pytest
from conftest import SECRET

from flintlock.runtime.dispatcher.exceptions import FlinkJobNotFoundException
from flintlock.runtime.dispatcher.savepoint_operations import (
    SavepointOperation,
    UnknownOperationException,
)
from flintlock.runtime.ids import JobID
from flintlock.runtime.rpc.exceptions import RemoteError

PREFIXES = pytest.mark.parametrize("prefix", ["/v1", ""])

JOB = JobID("0123456789abcdef0123456789abcdef")
TRIGGER = "fedcba9876543210fedcba9876543210"
AUTH = {"Authorization": f"Bearer {SECRET}"}
SAVEPOINTS = f"/v1/jobs/{JOB}/savepoints"
STOP = f"/v1/jobs/{JOB}/stop"


def _operation(status: str, location: str = "", failure: str = "") -> dict[str, object]:
    """The Dispatcher's answer, built by the real ``SavepointOperation``."""
    return SavepointOperation(JOB, TRIGGER, status, location, failure).to_json()


@pytest.fixture
def rest(rest):
    rest.on("trigger_savepoint", lambda job_id, directory, cancel: TRIGGER)
    rest.on("stop_with_savepoint", lambda job_id, directory, drain: TRIGGER)
    return rest


# ---- authentication ------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [SAVEPOINTS, STOP])
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"},
                                     {"Authorization": f"Basic {SECRET}"}])
def test_trigger_and_stop_need_the_cluster_secret(rest, url, headers):
    r = rest.client.post(url, json={}, headers=headers)
    assert r.status_code == 401
    assert "Authorization: Bearer" in r.json()["errors"][0]
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert rest.calls("trigger_savepoint") == [] and rest.calls("stop_with_savepoint") == []


def test_the_secret_is_checked_before_the_body(rest):
    r = rest.client.post(SAVEPOINTS, content=b"{not json")
    assert r.status_code == 401


@pytest.mark.parametrize("url", [SAVEPOINTS, STOP])
def test_a_cluster_without_secret_refuses_savepoints(make_rest, url):
    rest = make_rest(secret=None)
    r = rest.client.post(url, json={}, headers=AUTH)
    assert r.status_code == 401
    assert "security.cluster.secret" in r.json()["errors"][0]
    assert rest.calls("trigger_savepoint") == []


# ---- trigger -------------------------------------------------------------------------------------


@PREFIXES
def test_trigger_answers_202_with_the_request_id(rest, prefix):
    r = rest.client.post(f"{prefix}/jobs/{JOB}/savepoints", headers=AUTH,
                         json={"target-directory": "/tmp/sp", "cancel-job": True})
    assert r.status_code == 202
    assert r.json() == {"request-id": TRIGGER}
    (call,) = rest.calls("trigger_savepoint")
    assert call.args == (JOB, "/tmp/sp", True)


@pytest.mark.parametrize("body", [None, {}, {"target-directory": None, "cancel-job": None},
                                  {"target-directory": None, "cancel-job": False,
                                   "formatType": "CANONICAL", "triggerId": None}])
def test_trigger_defaults_and_flinks_own_body(rest, body):
    """No body, ``{}``, nulls and what Flink's Java client sends: the cluster's directory, no
    cancel."""
    r = (rest.client.post(SAVEPOINTS, headers=AUTH) if body is None
         else rest.client.post(SAVEPOINTS, headers=AUTH, json=body))
    assert r.status_code == 202
    assert rest.calls("trigger_savepoint")[0].args == (JOB, None, False)


def test_trigger_of_an_unknown_job_is_404(rest):
    def unknown(job_id, directory, cancel):
        raise FlinkJobNotFoundException(job_id)

    rest.on("trigger_savepoint", unknown)
    r = rest.client.post(SAVEPOINTS, headers=AUTH, json={})
    assert r.status_code == 404
    assert r.json() == {"errors": [f"Could not find Flink job ({JOB})"]}


@pytest.mark.parametrize(("body", "named"), [
    ({"cancel-job": "yes"}, "cancel-job"),
    ({"cancel-job": 1}, "cancel-job"),
    ({"target-directory": 5}, "target-directory"),
    ({"target-directory": ""}, "target-directory"),
    ({"cancelJob": True}, "cancelJob"),
    ({"targetDirectory": "/sp"}, "targetDirectory"),
    ({"formatType": "ZIP"}, "formatType"),
    ({"triggerId": TRIGGER}, "triggerId"),
])
def test_bad_trigger_bodies_are_400_naming_the_field(rest, body, named):
    r = rest.client.post(SAVEPOINTS, headers=AUTH, json=body)
    assert r.status_code == 400
    (message,) = r.json()["errors"]
    assert message.startswith("Bad request") and repr(named) in message
    assert rest.calls("trigger_savepoint") == []


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b'"/tmp/sp"'])
def test_a_body_that_is_not_a_json_object_is_400(rest, raw):
    r = rest.client.post(SAVEPOINTS, headers={**AUTH, "Content-Type": "application/json"},
                         content=raw)
    assert r.status_code == 400
    assert "JSON" in r.json()["errors"][0]
    assert rest.calls("trigger_savepoint") == []


def test_an_oversized_body_is_413(rest):
    r = rest.client.post(SAVEPOINTS, headers=AUTH,
                         json={"target-directory": "/" + "x" * 70_000})
    assert r.status_code == 413
    assert rest.calls("trigger_savepoint") == []


def test_a_malformed_job_id_is_400(rest):
    r = rest.client.post("/v1/jobs/not-a-job/savepoints", headers=AUTH, json={})
    assert r.status_code == 400 and "jobid" in r.json()["errors"][0]
    assert rest.calls("trigger_savepoint") == []


# ---- stop ----------------------------------------------------------------------------------------


@PREFIXES
@pytest.mark.parametrize("drain", [False, True])
def test_stop_stops_the_job_with_a_savepoint(rest, prefix, drain):
    r = rest.client.post(f"{prefix}/jobs/{JOB}/stop", headers=AUTH,
                         json={"targetDirectory": "/tmp/sp", "drain": drain,
                               "formatType": "CANONICAL", "triggerId": None})
    assert r.status_code == 202
    assert r.json() == {"request-id": TRIGGER}
    assert rest.calls("stop_with_savepoint")[0].args == (JOB, "/tmp/sp", drain)
    assert rest.calls("trigger_savepoint") == []


def test_stop_without_body_uses_the_cluster_directory(rest):
    assert rest.client.post(STOP, headers=AUTH).status_code == 202
    assert rest.client.post(STOP, headers=AUTH, json={"drain": None}).status_code == 202
    assert [c.args for c in rest.calls("stop_with_savepoint")] == [(JOB, None, False)] * 2


@pytest.mark.parametrize(("body", "named"), [
    ({"target-directory": "/sp"}, "target-directory"),  # the savepoint body's name
    ({"drain": "false"}, "drain"),
    ({"targetDirectory": ""}, "targetDirectory"),
])
def test_bad_stop_bodies_are_400_naming_the_field(rest, body, named):
    r = rest.client.post(STOP, headers=AUTH, json=body)
    assert r.status_code == 400
    assert repr(named) in r.json()["errors"][0]
    assert rest.calls("stop_with_savepoint") == []


# ---- status --------------------------------------------------------------------------------------


@PREFIXES
def test_status_in_progress_then_completed(rest, prefix):
    answers = [_operation("IN_PROGRESS"), _operation("COMPLETED", "/tmp/sp/savepoint-012345-ab")]
    rest.on("savepoint_status", lambda job_id, trigger_id: answers.pop(0))
    url = f"{prefix}/jobs/{JOB}/savepoints/{TRIGGER}"

    first = rest.client.get(url)
    assert first.status_code == 200
    assert first.json() == {"status": {"id": "IN_PROGRESS"}, "operation": None}
    second = rest.client.get(url).json()
    assert second == {"status": {"id": "COMPLETED"},
                      "operation": {"location": "/tmp/sp/savepoint-012345-ab"}}
    assert [c.args for c in rest.calls("savepoint_status")] == [(JOB, TRIGGER)] * 2


def test_status_of_a_failed_savepoint_carries_the_cause(rest):
    rest.on("savepoint_status",
            lambda job_id, trigger_id: _operation("FAILED", failure="No savepoint directory"))
    body = rest.client.get(f"{SAVEPOINTS}/{TRIGGER}").json()
    assert body["status"] == {"id": "COMPLETED"}
    assert "location" not in body["operation"]
    assert body["operation"]["failure-cause"]["stack-trace"] == "No savepoint directory"


@pytest.mark.parametrize("error", [
    UnknownOperationException(f"There is no savepoint operation with trigger id {TRIGGER}"),
    RemoteError("flintlock.runtime.dispatcher.savepoint_operations.UnknownOperationException",
                f"There is no savepoint operation with trigger id {TRIGGER}"),
])
def test_an_unknown_trigger_id_is_404(rest, error):
    def unknown(job_id, trigger_id):
        raise error

    rest.on("savepoint_status", unknown)
    r = rest.client.get(f"{SAVEPOINTS}/{TRIGGER}")
    assert r.status_code == 404
    assert r.json() == {"errors": [f"There is no savepoint operation with trigger id {TRIGGER}"]}


def test_status_needs_no_secret_but_parses_its_ids(rest):
    rest.on("savepoint_status", lambda job_id, trigger_id: _operation("IN_PROGRESS"))
    assert rest.client.get(f"{SAVEPOINTS}/{TRIGGER}").status_code == 200
    r = rest.client.get(f"{SAVEPOINTS}/{TRIGGER.upper()}")
    assert r.status_code == 400 and "triggerid" in r.json()["errors"][0]
    r = rest.client.get(f"/v1/jobs/nope/savepoints/{TRIGGER}")
    assert r.status_code == 400 and "jobid" in r.json()["errors"][0]
    assert len(rest.calls("savepoint_status")) == 1


def test_openapi_documents_the_bodies(rest):
    paths = rest.client.get("/openapi.json").json()["paths"]
    trigger = paths["/v1/jobs/{jobid}/savepoints"]["post"]
    schema = trigger["requestBody"]["content"]["application/json"]["schema"]
    assert {"target-directory", "cancel-job"} <= set(schema["properties"])
    stop = paths["/v1/jobs/{jobid}/stop"]["post"]["requestBody"]["content"]["application/json"]
    assert {"targetDirectory", "drain"} <= set(stop["schema"]["properties"])
    assert "get" in paths["/v1/jobs/{jobid}/savepoints/{triggerid}"]
