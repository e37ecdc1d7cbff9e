"""Savepoints from the client side, without Spark: ``flintlock savepoint`` / ``stop`` and the remote
JobClient go through the real ``RestClusterClient`` and REST app to a testing Dispatcher (an
``httpx.MockTransport`` hands the client's requests to a ``TestClient``); ``flintlock run -s/-n``
reach the program's effective configuration."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.from_thread
import httpx
import pytest
from click.testing import CliRunner, Result

import flintlock.client.remote as remote
from flintlock.client.cli import cli
from flintlock.client.job_client import SavepointException
from flintlock.client.remote import RemoteJobClient
from flintlock.client.rest_cluster_client import RestClientException, RestClusterClient
from flintlock.config import Configuration
from flintlock.runtime.dispatcher.exceptions import FlinkJobNotFoundException
from flintlock.runtime.dispatcher.gateway import DispatcherGateway
from flintlock.runtime.dispatcher.savepoint_operations import (
    SavepointOperation,
    UnknownOperationException,
)
from flintlock.runtime.ids import JobID
from flintlock.runtime.rest import create_app
from flintlock.runtime.rpc.service import InProcRpcService
from flintlock.testing.gateways import TestingEndpoint

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=".*httpx2.*")
    from starlette.testclient import TestClient

SECRET = "sp-secret"
JOB = JobID("0123456789abcdef0123456789abcdef")
TRIGGER = "fedcba9876543210fedcba9876543210"
LOCATION = "/tmp/sp/savepoint-012345-0123456789ab"


def _operation(status: str, location: str = "", failure: str = "") -> dict[str, object]:
    return SavepointOperation(JOB, TRIGGER, status, location, failure).to_json()


@dataclass
class FakeCluster:
    """A REST app on a testing Dispatcher, reached by every ``RestClusterClient`` the CLI makes."""

    dispatcher: TestingEndpoint
    transport: httpx.BaseTransport
    tmp_path: Path
    #: (address, port, secret) of each RestClusterClient the code under test created
    clients: list[tuple[str, int, str | None]] = field(default_factory=list)

    def on(self, method: str, handler: Any) -> None:
        self.dispatcher.handlers[method] = handler

    def calls(self, method: str) -> list[tuple[Any, ...]]:
        return [c.args for c in self.dispatcher.calls_to(method)]

    def client(self, secret: str | None = SECRET) -> RestClusterClient:
        return RestClusterClient("jm.example", 8081, secret, transport=self.transport)

    def invoke(self, *args: str, secret: str | None = SECRET) -> Result:
        """``flintlock <args> -m jm.example:8081 -D cluster.state-dir=<tmp> [-D secret]``."""
        extra = ["-m", "jm.example:8081", "-D", f"cluster.state-dir={self.tmp_path}"]
        if secret is not None:
            extra += ["-D", f"security.cluster.secret={secret}"]
        return CliRunner().invoke(cli, [args[0], *extra, *args[1:]])


def _forwarding_transport(test_client: TestClient) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        headers = {k: v for k, v in request.headers.items() if k != "host"}  # the app's own
        answer = test_client.request(request.method, request.url.raw_path.decode("ascii"),
                                     content=request.content, headers=headers)
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

    return httpx.MockTransport(handle)


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCluster]:
    for name in ("FLINTLOCK_CONF_DIR", "FLINK_CONF_DIR", "FLINTLOCK_CLUSTER_SECRET"):
        monkeypatch.delenv(name, raising=False)
    with anyio.from_thread.start_blocking_portal() as portal:
        endpoint = TestingEndpoint("dispatcher", DispatcherGateway,
                                   trigger_savepoint=lambda job_id, directory, cancel: TRIGGER,
                                   stop_with_savepoint=lambda job_id, directory, drain: TRIGGER)

        async def start() -> Any:
            rpc = InProcRpcService()
            rpc.register(endpoint)
            await endpoint.start()
            return await rpc.connect(endpoint.address, DispatcherGateway)

        app = create_app(portal.call(start), Configuration(), secret=SECRET)
        test_client = TestClient(app, base_url="http://localhost")
        test_client.portal = portal  # run requests in the dispatcher's loop
        fake = FakeCluster(endpoint, _forwarding_transport(test_client), tmp_path)

        def rest_cluster_client(address: str, port: int, secret: str | None = None,
                                timeout_s: float = 60.0, leader: Any = None,
                                ssl_context: Any = None) -> RestClusterClient:
            fake.clients.append((address, port, secret))
            return RestClusterClient(address, port, secret, timeout_s, transport=fake.transport,
                                     leader=leader)

        monkeypatch.setattr(remote, "RestClusterClient", rest_cluster_client)
        try:
            yield fake
        finally:
            test_client.portal = None
            portal.call(endpoint.stop)


# ---- flintlock savepoint -------------------------------------------------------------------------


def test_savepoint_prints_flinks_lines(cluster: FakeCluster) -> None:
    cluster.on("savepoint_status", lambda job_id, trigger_id: _operation("COMPLETED", LOCATION))
    result = cluster.invoke("savepoint", str(JOB), "/tmp/sp")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"Triggering savepoint for job {JOB}.",
        "Waiting for response...",
        f"Savepoint completed. Path: {LOCATION}",
        "You can resume your program from this savepoint with the run command.",
    ]
    assert cluster.calls("trigger_savepoint") == [(JOB, "/tmp/sp", False)]
    assert cluster.calls("savepoint_status") == [(JOB, TRIGGER)]
    assert cluster.clients == [("jm.example", 8081, SECRET)]  # -m and the secret were used


def test_savepoint_polls_until_the_operation_completed(cluster: FakeCluster) -> None:
    answers = [_operation("IN_PROGRESS"), _operation("COMPLETED", LOCATION)]
    cluster.on("savepoint_status", lambda job_id, trigger_id: answers.pop(0))
    result = cluster.invoke("savepoint", str(JOB))
    assert result.exit_code == 0, result.output
    assert f"Savepoint completed. Path: {LOCATION}" in result.stdout
    assert cluster.calls("savepoint_status") == [(JOB, TRIGGER)] * 2
    assert cluster.calls("trigger_savepoint") == [(JOB, None, False)]


def test_a_failed_savepoint_exits_1_with_its_cause(cluster: FakeCluster) -> None:
    cause = ("No savepoint directory: give one (flintlock savepoint JOBID DIR) or set "
             "state.savepoints.dir")
    cluster.on("savepoint_status", lambda job_id, trigger_id: _operation("FAILED", failure=cause))
    result = cluster.invoke("savepoint", str(JOB))
    assert result.exit_code == 1
    assert f"the savepoint of job {JOB} failed: {cause}" in result.stderr
    assert "Savepoint completed" not in result.stdout


def test_savepoint_of_an_unknown_job_exits_1(cluster: FakeCluster) -> None:
    def unknown(job_id: JobID, directory: str | None, cancel: bool) -> str:
        raise FlinkJobNotFoundException(job_id)

    cluster.on("trigger_savepoint", unknown)
    result = cluster.invoke("savepoint", str(JOB), "/tmp/sp")
    assert result.exit_code == 1
    assert f"refused (404): Could not find Flink job ({JOB})" in result.stderr
    assert cluster.calls("savepoint_status") == []


def test_savepoint_without_the_secret_is_refused(cluster: FakeCluster) -> None:
    result = cluster.invoke("savepoint", str(JOB), "/tmp/sp", secret=None)
    assert result.exit_code == 1
    assert "refused (401)" in result.stderr and "security.cluster.secret" in result.stderr
    assert cluster.calls("trigger_savepoint") == []


def test_a_malformed_job_id_is_refused_before_any_request(cluster: FakeCluster) -> None:
    result = cluster.invoke("savepoint", "not-a-job-id", "/tmp/sp")
    assert result.exit_code == 1
    assert "'not-a-job-id' is not a job id" in result.stderr
    assert cluster.clients == [] and cluster.calls("trigger_savepoint") == []


def test_savepoint_without_a_cluster_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    def rest_cluster_client(address: str, port: int, secret: str | None = None,
                            timeout_s: float = 60.0, leader: Any = None,
                            ssl_context: Any = None) -> RestClusterClient:
        return RestClusterClient(address, port, secret, timeout_s,
                                 transport=httpx.MockTransport(refuse), leader=leader)

    monkeypatch.setattr(remote, "RestClusterClient", rest_cluster_client)
    result = CliRunner().invoke(cli, ["savepoint", "-m", "127.0.0.1:1", str(JOB)])
    assert result.exit_code == 1
    assert "No flintlock cluster is reachable at http://127.0.0.1:1" in result.stderr


# ---- flintlock stop ------------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["-p", "--savepoint-path", "--savepointPath"])
def test_stop_suspends_the_job_with_a_savepoint(cluster: FakeCluster, option: str) -> None:
    cluster.on("savepoint_status", lambda job_id, trigger_id: _operation("COMPLETED", LOCATION))
    result = cluster.invoke("stop", option, "/tmp/sp", str(JOB))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"Suspending job {JOB}.",
                                          f"Savepoint completed. Path: {LOCATION}"]
    assert cluster.calls("stop_with_savepoint") == [(JOB, "/tmp/sp", False)]
    assert cluster.calls("trigger_savepoint") == []


@pytest.mark.parametrize("option", ["-d", "--drain"])
def test_stop_with_drain_drains_the_job(cluster: FakeCluster, option: str) -> None:
    cluster.on("savepoint_status", lambda job_id, trigger_id: _operation("COMPLETED", LOCATION))
    result = cluster.invoke("stop", option, str(JOB))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"Draining job {JOB}."
    assert cluster.calls("stop_with_savepoint") == [(JOB, None, True)]


def test_stop_without_a_directory_and_a_failure(cluster: FakeCluster) -> None:
    cluster.on("savepoint_status",
               lambda job_id, trigger_id: _operation("FAILED", failure="savepoint 3 failed: x"))
    result = cluster.invoke("stop", str(JOB))
    assert result.exit_code == 1
    assert cluster.calls("stop_with_savepoint") == [(JOB, None, False)]
    assert "failed: savepoint 3 failed: x" in result.stderr


# ---- RestClusterClient and the remote JobClient ----------------------------------------------------


def test_rest_client_trigger_status_and_stop(cluster: FakeCluster) -> None:
    cluster.on("savepoint_status", lambda job_id, trigger_id: _operation("IN_PROGRESS"))
    with cluster.client() as client:
        assert client.trigger_savepoint(JOB, "/tmp/sp", cancel_job=True) == TRIGGER
        assert client.stop_with_savepoint(str(JOB), "/tmp/other", drain=True) == TRIGGER
        assert client.savepoint_status(JOB, TRIGGER) == {"status": {"id": "IN_PROGRESS"},
                                                          "operation": None}
    assert cluster.calls("trigger_savepoint") == [(JOB, "/tmp/sp", True)]
    assert cluster.calls("stop_with_savepoint") == [(JOB, "/tmp/other", True)]


def test_rest_client_unknown_trigger_id_is_a_404(cluster: FakeCluster) -> None:
    def unknown(job_id: JobID, trigger_id: str) -> dict[str, object]:
        raise UnknownOperationException(f"no savepoint operation {trigger_id}")

    cluster.on("savepoint_status", unknown)
    with cluster.client() as client, pytest.raises(RestClientException) as info:
        client.savepoint_status(JOB, TRIGGER)
    assert info.value.status_code == 404
    assert info.value.errors == [f"no savepoint operation {TRIGGER}"]


def test_remote_job_client_savepoint_and_stop(cluster: FakeCluster) -> None:
    cluster.on("savepoint_status", lambda job_id, trigger_id: _operation("COMPLETED", LOCATION))
    job_client = RemoteJobClient(cluster.client(), JOB, "job", show_progress=False)
    assert job_client.trigger_savepoint("/tmp/sp") == LOCATION
    assert job_client.stop_with_savepoint() == LOCATION
    assert cluster.calls("trigger_savepoint") == [(JOB, "/tmp/sp", False)]
    assert cluster.calls("stop_with_savepoint") == [(JOB, None, False)]


def test_remote_job_client_raises_the_failure(cluster: FakeCluster) -> None:
    cluster.on("savepoint_status",
               lambda job_id, trigger_id: _operation("FAILED", failure="the job ended"))
    job_client = RemoteJobClient(cluster.client(), JOB, "job", show_progress=False)
    with pytest.raises(SavepointException, match="the job ended"):
        job_client.trigger_savepoint("/tmp/sp", cancel_job=True)


# ---- flintlock run -s / -n ---------------------------------------------------------------------------

_PRINT_RESTORE = """\
from flintlock.api.environment import StreamExecutionEnvironment
from flintlock.client.context import current_context
from flintlock.config.options import SAVEPOINT_IGNORE_UNCLAIMED, SAVEPOINT_PATH

conf = StreamExecutionEnvironment().get_configuration()
print(f"path={conf.get(SAVEPOINT_PATH)} ignore={conf.get(SAVEPOINT_IGNORE_UNCLAIMED)}")
current_context().submitted.append("no job")  # stands in for execute()
"""


@pytest.fixture
def restore_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("FLINTLOCK_CONF_DIR", "FLINK_CONF_DIR"):
        monkeypatch.delenv(name, raising=False)
    program = tmp_path / "restore.py"
    program.write_text(_PRINT_RESTORE)
    return str(program)


@pytest.mark.parametrize(("options", "expected"), [
    ([], "path=None ignore=False"),
    (["-s", "/sp/savepoint-1"], "path=/sp/savepoint-1 ignore=False"),
    (["-s", "/sp/savepoint-1", "-n"], "path=/sp/savepoint-1 ignore=True"),
    (["--fromSavepoint", "/sp/a/_metadata", "--allowNonRestoredState"],
     "path=/sp/a/_metadata ignore=True"),
    (["--from-savepoint", "/sp/b", "--allow-non-restored-state"], "path=/sp/b ignore=True"),
    (["-D", "execution.savepoint.path=/from-D", "-s", "/from-s"], "path=/from-s ignore=False"),
    (["-D", "execution.savepoint.path=/from-D"], "path=/from-D ignore=False"),
])
def test_run_from_savepoint_sets_the_programs_configuration(restore_program: str,
                                                            options: list[str],
                                                            expected: str) -> None:
    result = CliRunner().invoke(cli, ["run", "--target", "local", *options, restore_program])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [expected]


def test_run_with_an_empty_savepoint_path_exits_1(restore_program: str) -> None:
    result = CliRunner().invoke(cli, ["run", "--target", "local", "-s", " ", restore_program])
    assert result.exit_code == 1
    assert "-s/--fromSavepoint: the path is empty" in result.stderr
    assert "path=" not in result.stdout
