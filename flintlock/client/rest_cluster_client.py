"""RestClusterClient: a session cluster as seen through its REST API (Flink ``RestClusterClient``).

Every call goes to ``http://<rest.address>:<rest.port>/v1/...`` with ``client.timeout``. A cluster
that does not answer raises ``ClusterNotReachableException`` naming the address it tried and how to
start one; REST errors raise ``RestClientException`` carrying Flink's ``{"errors": [...]}`` text.

Job submission sends the JobGraph (see ``flintlock.runtime.rest.submission``) with the cluster
secret (``security.cluster.secret``) as a bearer token: the JobManager never unpickles a
submission from an unauthenticated client. Savepoints and stop send it too (they change the job).

Savepoints (Flink ``RestClusterClient.triggerSavepoint`` / ``stopWithSavepoint``): the trigger
answers a trigger id at once; ``savepoint_status`` returns the ``AsynchronousOperationResult``
(``{"status": {"id": "IN_PROGRESS" | "COMPLETED"}, "operation": None | {"location"} |
{"failure-cause"}}``) to poll, e.g. with ``flintlock.client.job_client.wait_for_savepoint``.
"""

from __future__ import annotations

import base64
import json
import platform
import ssl
import time
from collections.abc import Callable
from typing import Any

import httpx

from flintlock.exceptions import FlintlockException
from flintlock.runtime.executiongraph.archived import ExceptionHistoryEntry, JobResult
from flintlock.runtime.ids import JobID
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.taskmanager.task_execution_state import SerializedError

__all__ = ["ClusterNotReachableException", "RestClientException", "RestClusterClient"]

#: how often a client whose leader is unreachable looks for the next one (s)
_LEADER_POLL_S = 0.2


class ClusterNotReachableException(FlintlockException):
    """No REST server answered at the configured address."""


class RestClientException(FlintlockException):
    """The REST server answered with an error (status code and Flink's errors list)."""

    def __init__(self, status_code: int, errors: list[str], url: str) -> None:
        self.status_code = status_code
        self.errors = errors
        super().__init__(f"{url} answered {status_code}: {'; '.join(errors) or 'no details'}")


def _client_versions() -> dict[str, str]:
    import importlib.metadata as md

    versions = {"python": platform.python_version()}
    for dist in ("pyspark", "flintlock"):
        try:
            versions[dist] = md.version(dist)
        except md.PackageNotFoundError:
            versions[dist] = "unknown"
    return versions


class RestClusterClient:
    """Synchronous client of one cluster's REST API.

    Args:
        address: REST host.
        port: REST port.
        secret: the cluster secret, needed to submit jobs, take savepoints and stop jobs.
        timeout_s: per-request timeout (``client.timeout``).
        transport: the httpx transport (tests pass an ``httpx.MockTransport``); default: HTTP.
        leader: with high availability, returns the leading JobManager's REST (host, port)
            (None while none is known): a request that cannot connect asks it again and retries
            at the new leader for up to ``timeout_s`` (Flink's RestClusterClient follows the
            REST leader the same way). Only connection failures are retried, so nothing is sent
            twice.
        ssl_context: https with this context (``security.ssl.rest.*``,
            ``net.ssl_utils.rest_client_ssl_context``: verifies the server's certificate and host
            name); None: plain http.
    """

    def __init__(self, address: str, port: int, secret: str | None = None,
                 timeout_s: float = 60.0, transport: httpx.BaseTransport | None = None,
                 leader: Callable[[], tuple[str, int] | None] | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl_context = ssl_context
        self._secret = secret
        self._timeout_s = timeout_s
        self._transport = transport
        self._leader = leader
        self._connect(address, port)

    def _connect(self, address: str, port: int) -> None:
        self.address = address
        self.port = port
        scheme = "http" if self._ssl_context is None else "https"
        self.base_url = f"{scheme}://{address}:{port}"
        self._http = httpx.Client(base_url=self.base_url, timeout=self._timeout_s,
                                  transport=self._transport, verify=self._ssl_context or True)

    def _follow_leader(self, deadline: float) -> bool:
        """After a failed connection: whether to try again (before ``deadline``, with a leader
        to follow), at the current leader's REST (it may have moved, or be the same address
        served by the next leader)."""
        if self._leader is None or time.monotonic() >= deadline:
            return False
        time.sleep(_LEADER_POLL_S)
        endpoint = self._leader()
        if endpoint is not None and endpoint != (self.address, self.port):
            self._http.close()
            self._connect(*endpoint)
        return True

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RestClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- plumbing ----------------------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        url = f"/v1{path}"
        deadline = time.monotonic() + self._timeout_s
        while True:
            try:
                response = self._http.request(method, url, **kwargs)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if self._follow_leader(deadline):
                    continue  # nothing was sent: safe to send again to the new leader
                raise ClusterNotReachableException(
                    f"No flintlock cluster is reachable at {self.base_url} ({exc}). Start one "
                    "with `flintlock cluster start`, or point the client at yours with -m "
                    "host:port (rest.address / rest.port)."
                ) from None
            except httpx.HTTPError as exc:
                raise ClusterNotReachableException(
                    f"Request to {self.base_url}{url} failed: {exc}") from None
            return self._answer(response, url)

    def _answer(self, response: httpx.Response, url: str) -> Any:
        if response.status_code >= 400:
            try:
                errors = list(response.json().get("errors", []))
            except (ValueError, AttributeError):
                errors = [response.text[:500]]
            raise RestClientException(response.status_code, errors, f"{self.base_url}{url}")
        if not response.content:
            return {}
        return response.json()

    def _auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._secret}"} if self._secret else {}

    # ---- cluster -------------------------------------------------------------------------------------

    def overview(self) -> dict[str, Any]:
        return self._request("GET", "/overview")

    def config(self) -> dict[str, Any]:
        return self._request("GET", "/config")

    def task_managers(self) -> list[dict[str, Any]]:
        return list(self._request("GET", "/taskmanagers")["taskmanagers"])

    def shutdown(self) -> None:
        """``DELETE /cluster`` with the cluster secret (401 without it)."""
        self._request("DELETE", "/cluster", headers=self._auth_headers())

    # ---- jobs ----------------------------------------------------------------------------------------

    def submit_job(self, job_graph: JobGraph) -> JobID:
        """Submit; raises RestClientException (e.g. 401 without the secret, 400 version mismatch)."""
        from flintlock.runtime.rest.submission import serialize_job_graph

        request = {"jobGraphFileName": "job.graph", "client": _client_versions()}
        self._request(
            "POST", "/jobs", headers=self._auth_headers(),
            data={"request": json.dumps(request)},
            files={"job.graph": ("job.graph", serialize_job_graph(job_graph),
                                 "application/octet-stream")},
        )
        return job_graph.job_id

    def list_jobs(self) -> list[dict[str, Any]]:
        return list(self._request("GET", "/jobs/overview")["jobs"])

    def job_details(self, job_id: JobID | str) -> dict[str, Any]:
        return self._request("GET", f"/jobs/{job_id}")

    def job_exceptions(self, job_id: JobID | str, max_exceptions: int | None = None) -> dict[str, Any]:
        """``GET /jobs/:jobid/exceptions`` (Flink ``JobExceptionsInfoWithHistory``)."""
        params = {"maxExceptions": max_exceptions} if max_exceptions is not None else None
        return self._request("GET", f"/jobs/{job_id}/exceptions", params=params)

    def vertex_metrics(self, job_id: JobID | str, vertex_id: str, names: list[str],
                       agg: str = "sum,min,avg") -> dict[str, dict[str, float]]:
        """``GET /jobs/:jid/vertices/:vid/subtasks/metrics``: metric -> {aggregation: value}."""
        body = self._request("GET", f"/jobs/{job_id}/vertices/{vertex_id}/subtasks/metrics",
                             params={"get": ",".join(names), "agg": agg})
        return {m["id"]: {k: float(v) for k, v in m.items() if k != "id"} for m in body}

    def coordination_request(self, job_id: JobID | str, operator_id: str,
                             request: dict[str, Any]) -> dict[str, Any]:
        """``POST /jobs/:jobid/coordinators/:operatorid`` (a STREAMING job's collect results;
        needs the cluster secret)."""
        return self._request("POST", f"/jobs/{job_id}/coordinators/{operator_id}",
                             json=request, headers=self._auth_headers())

    def job_status(self, job_id: JobID | str) -> str:
        return str(self._request("GET", f"/jobs/{job_id}/status")["status"])

    def cancel(self, job_id: JobID | str) -> None:
        self._request("PATCH", f"/jobs/{job_id}", params={"mode": "cancel"})

    def trigger_savepoint(self, job_id: JobID | str, target_directory: str | None = None,
                          cancel_job: bool = False) -> str:
        """``POST /jobs/:jobid/savepoints``; returns the trigger id (poll ``savepoint_status``).

        Raises:
            RestClientException: 404 unknown job, 401 without the secret, 400 bad request.
        """
        return self._trigger(f"/jobs/{job_id}/savepoints",
                             {"target-directory": target_directory, "cancel-job": cancel_job})

    def _trigger(self, path: str, body: dict[str, Any]) -> str:
        """POST an asynchronous operation with the cluster secret; its trigger id."""
        answer = self._request("POST", path, json=body, headers=self._auth_headers())
        return str(answer["request-id"])

    def savepoint_status(self, job_id: JobID | str, trigger_id: str) -> dict[str, Any]:
        """``GET /jobs/:jobid/savepoints/:triggerid``: the ``AsynchronousOperationResult``.

        Raises:
            RestClientException: 404 unknown job or trigger id.
        """
        return dict(self._request("GET", f"/jobs/{job_id}/savepoints/{trigger_id}"))

    def stop_with_savepoint(self, job_id: JobID | str, target_directory: str | None = None,
                            drain: bool = False) -> str:
        """``POST /jobs/:jobid/stop`` (a savepoint, then the job finishes; after MAX_WATERMARK
        with ``drain``); returns the trigger id, whose status ``savepoint_status`` reads.

        Raises:
            RestClientException: 404 unknown job, 401 without the secret, 400 bad request.
        """
        return self._trigger(f"/jobs/{job_id}/stop",
                             {"targetDirectory": target_directory, "drain": drain})

    def job_result(self, job_id: JobID | str, wait_s: float = 0.0) -> JobResult | None:
        """The JobResult once the job is globally terminal, else ``None``; with ``wait_s`` (s),
        the JobManager answers as soon as the job ends, ``None`` after ``wait_s`` (``wait-ms``,
        a blocking query)."""
        params = {"wait-ms": max(1, round(wait_s * 1000))} if wait_s > 0 else None
        body = self._request("GET", f"/jobs/{job_id}/execution-result", params=params)
        if body.get("status", {}).get("id") != "COMPLETED":
            return None
        return job_result_from_json(body["job-execution-result"], self.job_name(job_id))

    def job_name(self, job_id: JobID | str) -> str:
        try:
            return str(self.job_details(job_id).get("name", ""))
        except RestClientException:
            return ""


def job_result_from_json(body: dict[str, Any], job_name: str = "") -> JobResult:
    """Flink's ``job-execution-result`` JSON -> JobResult (accumulators are base64 strings)."""
    failure = None
    cause = body.get("failure-cause")
    if cause:
        stack = str(cause.get("stack-trace", ""))
        class_name = str(cause.get("class", "Exception"))
        message = stack.strip().splitlines()[-1] if stack.strip() else ""
        if message.startswith(class_name + ":"):
            message = message[len(class_name) + 1:].strip()
        failure = ExceptionHistoryEntry(
            SerializedError(class_name, str(cause.get("message", message)), stack),
            int(cause.get("timestamp", 0)),
            cause.get("task-name"), cause.get("location"),
        )
    accumulators = {
        name: base64.b64decode(value) for name, value in body.get("accumulator-results", {}).items()
    }
    return JobResult(
        JobID.from_hex(body["id"]), job_name, str(body.get("application-status", "UNKNOWN")),
        int(body.get("net-runtime", 0)), accumulators, failure,
    )
