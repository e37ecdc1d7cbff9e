"""Remote execution: ``execution.target: remote`` submits each job to a session cluster over REST.

The cluster is found at ``rest.address:rest.port`` (``flintlock run -m host:port`` sets both). The
cluster secret comes from ``security.cluster.secret``, the ``FLINTLOCK_CLUSTER_SECRET`` environment
variable (set for programs run by ``POST /jars/:jarid/run``), or, for a cluster started on this
machine by ``flintlock cluster start``, from its state directory (``cluster.state-dir``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flintlock.client.job_client import PollingJobClient, wait_for_savepoint
from flintlock.client.rest_cluster_client import RestClusterClient
from flintlock.client.secret_file import read_secret_file
from flintlock.config import Configuration
from flintlock.config.options import (
    CLIENT_TIMEOUT,
    CLUSTER_SECRET,
    CLUSTER_STATE_DIR,
    REST_ADDRESS,
    REST_PORT,
)
from flintlock.exceptions import FlintlockException
from flintlock.runtime.entrypoint.common import SECRET_ENV
from flintlock.runtime.executiongraph.archived import (
    ArchivedExecution,
    ArchivedExecutionGraph,
    ArchivedJobVertex,
    ExceptionHistoryEntry,
    JobResult,
)
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID, JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus, JobType
from flintlock.runtime.metrics.live_task_metrics import MIN_WATERMARK_METRIC, LiveTaskMetrics
from flintlock.runtime.net.ssl_utils import rest_client_ssl_context, rest_scheme
from flintlock.runtime.taskmanager.task_execution_state import SerializedError

__all__ = ["RemoteJobClient", "cluster_state_dir", "rest_client_for", "rest_url", "submit_remote"]

log = logging.getLogger(__name__)


def cluster_state_dir(configuration: Configuration) -> Path:
    """Where ``flintlock cluster start`` keeps pid files, logs, ports and the secret."""
    configured = configuration.get(CLUSTER_STATE_DIR)
    return Path(configured).expanduser() if configured else Path.home() / ".flintlock" / "cluster"


def _secret(configuration: Configuration) -> str | None:
    secret = configuration.get(CLUSTER_SECRET) or os.environ.get(SECRET_ENV)
    if secret:
        return str(secret)
    try:
        return read_secret_file(cluster_state_dir(configuration) / "secret")
    except OSError:
        return None


def _rest_port(configuration: Configuration) -> int:
    """``rest.port`` when configured (and not 0, which servers use for "any port"); else the port
    of a cluster started on this machine by ``flintlock cluster start`` (its port file); else the
    default 8081."""
    if configuration.contains(REST_PORT) and int(configuration.get(REST_PORT)) != 0:
        return int(configuration.get(REST_PORT))
    try:
        data = json.loads((cluster_state_dir(configuration) / "jobmanager.port").read_text())
        return int(data["rest_port"])
    except (OSError, ValueError, KeyError):
        return int(configuration.get(REST_PORT))


def _leader_of(configuration: Configuration) -> Callable[[], tuple[str, int] | None] | None:
    """With high availability (configured, or a cluster started from the state directory with
    several JobManagers) and no explicit ``rest.address`` / ``rest.port``: a function giving the
    leading JobManager's REST (host, port), None while none is known (Flink's REST leader
    retrieval); else None."""
    if configuration.contains(REST_ADDRESS) or (
            configuration.contains(REST_PORT) and int(configuration.get(REST_PORT)) != 0):
        return None
    from flintlock.client.standalone_cluster import cluster_ha_services
    from flintlock.runtime.highavailability.services import create_ha_services

    ha = create_ha_services(configuration)
    from_state = ha is None
    if from_state:
        ha = cluster_ha_services(cluster_state_dir(configuration))
    if ha is None:
        return None

    def current() -> tuple[str, int] | None:
        try:
            leader = ha.current_leader()
        except FlintlockException:  # a started cluster's ZooKeeper unreachable: no leader known
            if not from_state:
                raise
            return None
        return leader.rest_endpoint() if leader is not None else None

    return current


def _rest_endpoint(configuration: Configuration,
                   leader: Callable[[], tuple[str, int] | None] | None) -> tuple[str, int]:
    """(host, port) of the REST server to talk to: the leader's with high availability (when
    one is known), else ``rest.address`` and ``_rest_port``."""
    endpoint = leader() if leader is not None else None
    return endpoint or (configuration.get(REST_ADDRESS), _rest_port(configuration))


def rest_url(configuration: Configuration) -> str:
    """``http[s]://<host>:<port>`` of the cluster this configuration reaches."""
    host, port = _rest_endpoint(configuration, _leader_of(configuration))
    return f"{rest_scheme(configuration)}://{host}:{port}"


def rest_client_for(configuration: Configuration) -> RestClusterClient:
    """A client of the configured cluster; with high availability it follows the leader."""
    leader = _leader_of(configuration)
    host, port = _rest_endpoint(configuration, leader)
    return RestClusterClient(host, port, _secret(configuration),
                             configuration.get(CLIENT_TIMEOUT), leader=leader,
                             ssl_context=rest_client_ssl_context(configuration))


def submit_remote(job_graph: JobGraph, configuration: Configuration, show_progress: bool) -> RemoteJobClient:
    client = rest_client_for(configuration)
    client.submit_job(job_graph)
    return RemoteJobClient(client, job_graph.job_id, job_graph.name, show_progress)


def _history_from_rest(body: dict[str, Any]) -> tuple[ExceptionHistoryEntry, ...]:
    """``GET /jobs/:jobid/exceptions`` -> the flat exception history, oldest first.

    A root entry's ``concurrentExceptions`` follow it, marked ``concurrent``. The REST shape has
    no message: ``SerializedError.message`` is left empty and the stack trace kept.
    """

    def entry(info: dict[str, Any], concurrent: bool) -> ExceptionHistoryEntry:
        error = SerializedError(str(info.get("exceptionName") or "Exception"), "",
                                str(info.get("stacktrace") or ""))
        return ExceptionHistoryEntry(error, int(info.get("timestamp") or 0), info.get("taskName"),
                                     info.get("endpoint"), concurrent=concurrent)

    flat: list[ExceptionHistoryEntry] = []
    for root in reversed(body.get("exceptionHistory", {}).get("entries", [])):
        flat.append(entry(root, False))
        flat.extend(entry(c, True) for c in root.get("concurrentExceptions", []))
    return tuple(flat)


def _has_failures(body: dict[str, Any]) -> bool:
    """Whether the job details show a failure: a restart, or a failed or cancelled subtask."""
    counts = body.get("status-counts", {})
    return (int(body.get("numRestarts", 0)) > 0 or body.get("state") in ("RESTARTING", "FAILING",
                                                                           "FAILED")
            or any(int(counts.get(s, 0)) > 0 for s in ("FAILED", "CANCELING", "CANCELED")))


def _archived_from_rest(body: dict[str, Any],
                        history: tuple[ExceptionHistoryEntry, ...] = ()) -> ArchivedExecutionGraph:
    """Just enough of ``GET /jobs/:jobid`` for progress display (per-vertex task counts) and the
    failure report (restarts, next restart time, exception history)."""
    vertices = []
    for v in body.get("vertices", []):
        vid = JobVertexID.from_hex(v["id"])
        subtasks = []
        index = 0
        for state_name, count in v.get("tasks", {}).items():
            for _ in range(int(count)):
                attempt = ExecutionAttemptID(ExecutionVertexID(vid, index), 0, "")
                subtasks.append(ArchivedExecution(attempt, ExecutionState[state_name], None, {}))
                index += 1
        vertices.append(ArchivedJobVertex(vid, v["name"], int(v["parallelism"]),
                                          int(v.get("maxParallelism", v["parallelism"])), "default",
                                          tuple(subtasks)))
    return ArchivedExecutionGraph(
        JobID.from_hex(body["jid"]), body.get("name", ""), JobType(body.get("job-type", "BATCH")),
        JobStatus(body["state"]), dict(body.get("timestamps", {})), tuple(vertices),
        pending_slot_requests=int(body.get("pending-slot-requests", 0)),
        exception_history=history,
        number_of_restarts=int(body.get("numRestarts", 0)),
        next_restart_attempt_ms=(
            int(body["next-restart-time"]) if int(body.get("next-restart-time", -1)) >= 0 else None
        ),
    )


#: live metrics fetched for the progress display of a running streaming job, and how often
_LIVE_NAMES = ("numRecordsIn", "numRecordsOut", "numRecordsOutPerSecond", "busyTimeMsPerSecond",
               "backPressuredTimeMsPerSecond", "currentInputWatermark")
_LIVE_INTERVAL_S = 1.0


def with_vertex_live_metrics(graph: ArchivedExecutionGraph,
                             live: dict[JobVertexID, dict[str, dict[str, float]]]
                             ) -> ArchivedExecutionGraph:
    """``graph`` with each vertex's aggregated REST metrics (``{name: {"sum"|"min"|"avg": v}}``)
    as the ``live`` metrics of its first subtask (what ``progress.live_summary`` shows)."""
    vertices = []
    for vertex in graph.vertices:
        m = live.get(vertex.id)
        if not m or not vertex.subtasks or "numRecordsIn" not in m:
            vertices.append(vertex)
            continue

        def value(name: str, how: str, m: dict[str, dict[str, float]] = m) -> float:
            return m.get(name, {}).get(how, 0.0)

        mark = int(value("currentInputWatermark", "min")) if "currentInputWatermark" in m else None
        first = vertex.subtasks[0]
        summary = LiveTaskMetrics(
            first.attempt_id, 0, records_in=int(value("numRecordsIn", "sum")),
            records_out=int(value("numRecordsOut", "sum")),
            busy_ms_per_second=value("busyTimeMsPerSecond", "avg"),
            back_pressured_ms_per_second=value("backPressuredTimeMsPerSecond", "avg"),
            records_out_per_second=value("numRecordsOutPerSecond", "sum"),
            input_watermark=None if mark is None or mark == MIN_WATERMARK_METRIC else mark)
        subtasks = (dataclasses.replace(first, live=summary), *vertex.subtasks[1:])
        vertices.append(dataclasses.replace(vertex, subtasks=subtasks))
    return dataclasses.replace(graph, vertices=tuple(vertices))


class RemoteJobClient(PollingJobClient):
    """JobClient of a job on a session cluster (polls REST)."""

    def __init__(self, client: RestClusterClient, job_id: JobID, job_name: str,
                 show_progress: bool) -> None:
        super().__init__(job_id, job_name, show_progress)
        self._client = client
        self._server_now_ms: int | None = None
        self._live: dict[JobVertexID, dict[str, dict[str, float]]] = {}
        self._live_fetched = float("-inf")

    def get_job_status(self) -> JobStatus:
        return JobStatus(self._client.job_status(self._job_id))

    def get_job_details(self) -> ArchivedExecutionGraph:
        """The job's details; with its exception history once the job had a failure, and the
        live metrics of a running streaming job's vertices (fetched at most once a second)."""
        body = self._client.job_details(self._job_id)
        if "now" in body:
            self._server_now_ms = int(body["now"])
        history: tuple[ExceptionHistoryEntry, ...] = ()
        if _has_failures(body):
            history = _history_from_rest(self._client.job_exceptions(self._job_id))
        graph = _archived_from_rest(body, history)
        if graph.job_type is JobType.STREAMING and graph.state is JobStatus.RUNNING:
            graph = self._with_live_metrics(graph)
        return graph

    def _with_live_metrics(self, graph: ArchivedExecutionGraph) -> ArchivedExecutionGraph:
        now = time.monotonic()
        if now - self._live_fetched >= _LIVE_INTERVAL_S:
            self._live_fetched = now
            for vertex in graph.vertices:
                try:
                    self._live[vertex.id] = self._client.vertex_metrics(
                        self._job_id, str(vertex.id), list(_LIVE_NAMES))
                except Exception as exc:  # the display is best effort
                    log.debug("job %s: no live metrics for %s: %s", self._job_id, vertex.id, exc)
        return with_vertex_live_metrics(graph, self._live)

    def _now_ms(self) -> int:
        """The server's clock at the last details response (its timestamps are on that clock)."""
        return self._server_now_ms if self._server_now_ms is not None else super()._now_ms()

    def cancel(self) -> None:
        self._client.cancel(self._job_id)

    def send_coordination_request(self, operator_id: str, request: dict[str, Any]) -> dict[str, Any]:
        return self._client.coordination_request(self._job_id, operator_id, request)

    def trigger_savepoint(self, target_directory: str | None = None, cancel_job: bool = False,
                          timeout_s: float = 600.0) -> str:
        """``POST /jobs/:jobid/savepoints``, then poll its status; returns the savepoint's path.

        Raises:
            SavepointException: it failed. TimeoutError: not done in ``timeout_s``.
            RestClientException: the cluster refused the request (e.g. 404 unknown job).
        """
        trigger_id = self._client.trigger_savepoint(self._job_id, target_directory, cancel_job)
        return self._wait_for_savepoint(trigger_id, timeout_s)

    def stop_with_savepoint(self, target_directory: str | None = None, drain: bool = False,
                            timeout_s: float = 600.0) -> str:
        """``POST /jobs/:jobid/stop`` (savepoint, then the job finishes), then poll; returns the
        path."""
        trigger_id = self._client.stop_with_savepoint(self._job_id, target_directory, drain)
        return self._wait_for_savepoint(trigger_id, timeout_s)

    def _wait_for_savepoint(self, trigger_id: str, timeout_s: float) -> str:
        return wait_for_savepoint(
            lambda: self._client.savepoint_status(self._job_id, trigger_id), timeout_s)

    def _result(self, wait_s: float = 0.0) -> JobResult | None:
        return self._client.job_result(self._job_id, wait_s)
