"""REST security (issue 16): secrets never served, DELETE /cluster authenticated, Host checked."""

from __future__ import annotations

import pytest

from flintlock import StreamExecutionEnvironment
from flintlock.config import Configuration
from flintlock.graph.job_graph_generator import create_job_graph
from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph
from flintlock.runtime.ids import JobID
from flintlock.runtime.jobgraph.types import JobStatus, JobType
from flintlock.runtime.rest.security import allowed_host_names, host_name_of

JOB = JobID("0123456789abcdef0123456789abcdef")
BEARER = "Authorization"


def _graph(configuration: dict[str, str]) -> ArchivedExecutionGraph:
    return ArchivedExecutionGraph(
        job_id=JOB, name="leaky", job_type=JobType.BATCH, state=JobStatus.RUNNING,
        state_timestamps={"RUNNING": 1}, vertices=(), configuration=configuration)


# ---- defect 1: the cluster secret and other credentials are never served ----------------------


def test_a_program_compiled_with_the_secret_in_its_configuration_does_not_carry_it():
    env = StreamExecutionEnvironment.get_execution_environment(Configuration({
        "security.cluster.secret": "hunter2", "pipeline.name": "leaky"}))
    env.from_collection([(1,)], "x INT").print()
    job_graph = create_job_graph(env.get_stream_graph())
    assert "security.cluster.secret" not in job_graph.configuration
    assert job_graph.configuration["pipeline.name"] == "leaky"
    assert "hunter2" not in repr(job_graph.configuration)


def test_job_config_hides_sensitive_keys_and_credentials_in_values(rest):
    rest.on("request_job", lambda job_id: _graph({
        "security.cluster.secret": "hunter2", "spark.hadoop.fs.s3a.secret.key": "AKIA-SECRET",
        "spark.remote": "sc://spark:15002/;token=tok-42", "parallelism.default": "2"}))
    r = rest.client.get(f"/jobs/{JOB}/config")
    assert r.status_code == 200
    user = r.json()["execution-config"]["user-config"]
    assert user == {"security.cluster.secret": "******",
                    "spark.hadoop.fs.s3a.secret.key": "******",
                    "spark.remote": "sc://spark:15002/;token=******", "parallelism.default": "2"}
    for leaked in ("hunter2", "AKIA-SECRET", "tok-42"):
        assert leaked not in r.text


def test_job_manager_config_hides_connect_tokens(make_rest):
    h = make_rest({"spark.remote": "sc://spark:15002/;token=tok-42"})
    values = {e["key"]: e["value"] for e in h.client.get("/jobmanager/config").json()}
    assert values["spark.remote"] == "sc://spark:15002/;token=******"


# ---- defect 3: DELETE /cluster needs the secret; Host is checked --------------------------------


@pytest.mark.parametrize("headers", [{}, {BEARER: "Bearer wrong"}, {BEARER: "Basic czNjcmV0"}])
def test_delete_cluster_without_the_secret_is_refused(rest, headers):
    r = rest.client.delete("/v1/cluster", headers=headers)
    assert r.status_code == 401, r.text
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert "security.cluster.secret" in r.json()["errors"][0]
    assert rest.calls("shutdown_cluster") == []


def test_delete_cluster_on_a_cluster_without_secret_is_refused(make_rest):
    h = make_rest(secret=None)
    assert h.client.delete("/cluster").status_code == 401
    assert h.calls("shutdown_cluster") == []


def test_cancel_stays_open_as_in_flink(rest):
    rest.on("cancel_job", lambda job_id: None)
    assert rest.client.patch(f"/jobs/{JOB}").status_code == 202


@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:8081", "localhost.evil.com",
                                  "127.0.0.1.nip.io:8081", ""])
def test_requests_naming_another_host_are_refused(rest, host):
    rest.on("request_cluster_overview", lambda: pytest.fail("the request reached a handler"))
    r = rest.client.get("/overview", headers={"Host": host})
    assert r.status_code == 400
    assert "rest.server.allowed-hosts" in r.json()["errors"][0]
    r = rest.client.delete("/cluster", headers={"Host": host, BEARER: f"Bearer {rest.secret}"})
    assert r.status_code == 400 and rest.calls("shutdown_cluster") == []


@pytest.mark.parametrize("host", ["localhost:8081", "127.0.0.1:8081", "[::1]:8081", "10.1.2.3",
                                  "LOCALHOST"])
def test_local_names_and_ip_addresses_are_answered(rest, host):
    r = rest.client.get("/config", headers={"Host": host})
    assert r.status_code == 200, r.text


def test_configured_names_are_answered_and_star_turns_the_check_off(make_rest):
    h = make_rest({"rest.server.allowed-hosts": "flink.example.com, jm-2"})
    assert h.client.get("/config", headers={"Host": "flink.example.com:443"}).status_code == 200
    assert h.client.get("/config", headers={"Host": "JM-2"}).status_code == 200
    assert h.client.get("/config", headers={"Host": "other.example.com"}).status_code == 400
    open_ = make_rest({"rest.server.allowed-hosts": "*"})
    assert open_.client.get("/config", headers={"Host": "other.example.com"}).status_code == 200


def test_allowed_host_names():
    names = allowed_host_names(Configuration({"rest.address": "jm.internal",
                                              "rest.bind-address": "0.0.0.0"}),
                               machine_names=["node-7", "node-7.dc.example.com"])
    assert names is not None
    assert {"localhost", "jm.internal", "node-7", "node-7.dc.example.com"} <= names
    assert allowed_host_names(Configuration({"rest.server.allowed-hosts": "*"})) is None
    assert host_name_of("[::1]:8081") == "::1" and host_name_of("Example.COM:80") == "example.com"
    assert host_name_of("::1") == "::1"


# ---- the OpenAPI document lists the real answers (what the fuzz test checks against) -----------


def test_openapi_documents_errors_security_and_ranges(rest):
    spec = rest.client.get("/openapi.json").json()
    assert spec["components"]["schemas"]["ErrorResponseBody"]["required"] == ["errors"]
    assert spec["components"]["securitySchemes"]["clusterSecret"]["scheme"] == "bearer"
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            codes = set(operation["responses"])
            assert "422" not in codes and {"400", "404", "503"} <= codes, (method, path)
    submit = spec["paths"]["/v1/jobs"]["post"]
    assert submit["security"] == [{"clusterSecret": []}]
    assert {"401", "409", "413"} <= set(submit["responses"])
    assert "401" in spec["paths"]["/v1/cluster"]["delete"]["responses"]
    assert "security" not in spec["paths"]["/v1/jobs/{jobid}"]["patch"]  # cancel stays open
    log = spec["paths"]["/v1/taskmanagers/{taskmanagerid}/log"]["get"]
    assert {"206", "416"} <= set(log["responses"])
    assert [p["name"] for p in log["parameters"] if p["in"] == "header"] == ["Range"]
    job_id = next(p for p in spec["paths"]["/v1/jobs/{jobid}"]["get"]["parameters"])
    assert job_id["schema"]["pattern"] == "^[0-9a-f]{32}$"


@pytest.mark.parametrize(("path", "allow"), [
    ("/v1/jobs", "GET, HEAD, POST"), ("/jobs/overview", "GET, HEAD"),
    (f"/jobs/{JOB}", "GET, HEAD, PATCH"), ("/jars/upload", "POST"),
])
def test_method_not_allowed_lists_the_documented_methods(rest, path, allow):
    r = rest.client.request("OPTIONS", path)
    assert r.status_code == 405 and r.headers["allow"] == allow
    assert r.json()["errors"]
