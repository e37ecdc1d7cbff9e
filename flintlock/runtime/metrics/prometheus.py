"""A Prometheus endpoint per process, with metric names as Flink's ``PrometheusReporter`` makes them.

Configuration: ``metrics.reporter.prom.port`` (a port or a range ``9249-9260``; the first free
port is used; unset: no endpoint) and ``metrics.reporter.prom.host`` (default ``127.0.0.1``).
The endpoint serves ``GET /metrics`` (and ``/``) in Prometheus' text format.

Names: ``flink_<scope>_<metric>`` with every character other than letters, digits and ``_``
replaced by ``_``, as Flink does; all values are gauges (Flink exports its counters as gauges too,
so the names carry no ``_total`` suffix). Label sets are bounded: no attempt ids or numbers.

- JobManager: ``flink_jobmanager_numRegisteredTaskManagers``, ``..._taskSlotsTotal``,
  ``..._taskSlotsAvailable``, ``..._numRunningJobs``, ``flink_jobmanager_numJobs{state}`` (jobs the
  Dispatcher knows, by JobStatus), ``flink_jobmanager_Status_Python_Memory_RSS`` (also
  ``_CPU_Time``, ``_Threads_Count``).
- TaskManager (label ``tm_id``): ``flink_taskmanager_Status_JVM_*``, ``..._Status_Flink_*`` and
  ``..._Status_Shuffle_*`` (Flink's status metrics, ``taskexecutor.process_status``),
  ``flink_taskmanager_Status_Python_*``,
  ``flink_taskmanager_taskSlotsTotal``, ``..._taskSlotsAvailable``, ``..._numRunningTasks``, and
  per subtask ``flink_taskmanager_job_task_<metric>`` for Flink's task metrics
  (``task_metrics.TASK_METRICS``: ``numRecordsIn``, ``numRecordsOut``, ``numBytesIn``,
  ``numBytesOut``, ``busyTimeMsPerSecond``, ``accumulateBusyTimeMs``, ...; live while the
  subtask runs, from the TaskExecutor's live reports) and, while a live report is there,
  ``currentInputWatermark`` / ``currentOutputWatermark``, with labels ``job_id``, ``job_name``,
  ``task_id``, ``task_name``, ``subtask_index``, ``tm_id``.

The HTTP server runs in the process's event loop (uvicorn, like the REST server); each scrape
awaits the process's metric sources (a TaskExecutor's ``request_metrics``, the Dispatcher's
overview), so nothing reads endpoint state from another thread.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from flintlock.config import Configuration
from flintlock.config.options import PROM_HOST, PROM_PORT
from flintlock.runtime.concurrency import run_blocking
from flintlock.runtime.dispatcher.gateway import ClusterOverview, DispatcherGateway
from flintlock.runtime.executiongraph.archived import JobDetails
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.runtime.metrics.job_manager_metrics import job_manager_metric_values
from flintlock.runtime.metrics.process import ProcessStats, process_metric_values, process_stats
from flintlock.runtime.metrics.task_manager_metrics import TaskManagerMetricsSnapshot
from flintlock.runtime.metrics.task_metrics import LIVE_TASK_METRICS, TASK_METRICS
from flintlock.runtime.taskexecutor.gateway import TaskExecutorGateway

if TYPE_CHECKING:
    from fastapi.responses import Response

__all__ = [
    "MetricsSource",
    "PrometheusReporter",
    "job_manager_families",
    "job_manager_source",
    "parse_ports",
    "prometheus_name",
    "start_prometheus_reporter",
    "task_manager_families",
    "task_manager_source",
]

log = logging.getLogger(__name__)

#: an async callable returning metric families (called on every scrape)
MetricsSource = Callable[[], Awaitable[list[Metric]]]

_TASK_LABELS = ["job_id", "job_name", "task_id", "task_name", "subtask_index", "tm_id"]


def prometheus_name(*parts: str) -> str:
    """``flink_<parts joined by _>`` with Flink's character replacement."""
    return re.sub(r"[^A-Za-z0-9_]", "_", "_".join(("flink", *parts)))


def _gauge(name: str, doc: str, value: float, labels: dict[str, str] | None = None) -> Metric:
    family = GaugeMetricFamily(name, doc, labels=list(labels or {}))
    family.add_metric(list((labels or {}).values()), value)
    return family


def _process_families(scope: str, stats: ProcessStats,
                      labels: dict[str, str] | None = None) -> list[Metric]:
    return [_gauge(prometheus_name(scope, name), name, value, labels)
            for name, value in process_metric_values(stats).items()]


def job_manager_families(overview: ClusterOverview, jobs: Iterable[JobDetails],
                         stats: ProcessStats) -> list[Metric]:
    """The JobManager's families (see the module docstring)."""
    values = job_manager_metric_values(overview, stats)
    families = [
        _gauge(prometheus_name("jobmanager", name), name, values[name])
        for name in ("numRegisteredTaskManagers", "taskSlotsTotal", "taskSlotsAvailable",
                     "numRunningJobs")
    ]
    by_state = GaugeMetricFamily(prometheus_name("jobmanager", "numJobs"),
                                 "Jobs the Dispatcher knows, by state.", labels=["state"])
    counts = {s.name: 0 for s in JobStatus}
    for job in jobs:
        counts[job.state.name] += 1
    for state, count in counts.items():
        by_state.add_metric([state], float(count))
    families.append(by_state)
    families += _process_families("jobmanager", stats)
    return families


def task_manager_families(snapshots: Sequence[TaskManagerMetricsSnapshot]) -> list[Metric]:
    """The families of one or more TaskManagers (a MiniCluster has several in one process)."""
    process: dict[str, GaugeMetricFamily] = {}
    own = {name: GaugeMetricFamily(prometheus_name("taskmanager", name), name, labels=["tm_id"])
           for name in ("taskSlotsTotal", "taskSlotsAvailable", "numRunningTasks")}
    tasks = {name: GaugeMetricFamily(prometheus_name("taskmanager", "job", "task", name), name,
                                     labels=_TASK_LABELS)
             for name in (*TASK_METRICS, *LIVE_TASK_METRICS)}
    for snap in snapshots:
        tm = snap.resource_id
        for name, value in {**snap.status, **process_metric_values(snap.process)}.items():
            if name not in process:
                process[name] = GaugeMetricFamily(prometheus_name("taskmanager", name), name,
                                                  labels=["tm_id"])
            process[name].add_metric([tm], value)
        own["taskSlotsTotal"].add_metric([tm], float(snap.slots_total))
        own["taskSlotsAvailable"].add_metric([tm], float(snap.slots_available))
        own["numRunningTasks"].add_metric([tm], float(snap.running_tasks))
        for sample in snap.tasks:
            labels = [sample.job_id, sample.job_name, sample.task_id, sample.task_name,
                      str(sample.subtask_index), tm]
            for name, value in sample.metrics(snap.now_ms).items():
                tasks[name].add_metric(labels, value)
    return [*process.values(), *own.values(), *tasks.values()]


class _Families:
    """A collector that yields the families of one scrape."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return iter(self._families)


def parse_ports(spec: str | int) -> list[int]:
    """``"9249"`` -> ``[9249]``; ``"9249-9251"`` -> ``[9249, 9250, 9251]``.

    Raises:
        ValueError: not a port or range.
    """
    low_text, _, high_text = str(spec).partition("-")
    try:
        low = int(low_text)
        high = int(high_text) if high_text else low
    except ValueError:
        raise ValueError(f"{spec!r} is not a port or a port range") from None
    if not 0 <= low <= high <= 65535:
        raise ValueError(f"{spec!r} is not a port or a port range")
    return list(range(low, high + 1))


class PrometheusReporter:
    """Serves the metric families of ``sources`` on ``host`` at the first free port of ``ports``.

    Args:
        sources: awaited on every scrape; a failing source is logged and skipped.
        host: interface to bind.
        ports: candidate ports, tried in order (0 = any free port).
    """

    def __init__(self, sources: Sequence[MetricsSource], host: str = "127.0.0.1",
                 ports: Sequence[int] = (9249,)) -> None:
        self._sources = list(sources)
        self.host = host
        self._ports = list(ports)
        self._server: Any = None
        # imported here: a process without a reporter (the default) does not pay FastAPI's
        # import (~0.2-0.4 s) before it serves
        from fastapi import FastAPI

        app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
        app.add_api_route("/metrics", self._serve, methods=["GET"], response_model=None)
        app.add_api_route("/", self._serve, methods=["GET"], response_model=None)
        self.app = app

    async def render(self) -> bytes:
        """One scrape in Prometheus' text format."""
        families: list[Metric] = []
        for source in self._sources:
            try:
                families += await source()
            except Exception as exc:  # one unreachable component must not hide the others
                log.warning("Prometheus: a metrics source failed: %s", exc)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families(families))  # type: ignore[arg-type]
        return bytes(generate_latest(registry))

    async def _serve(self) -> Response:
        from fastapi.responses import Response

        return Response(await self.render(), media_type=CONTENT_TYPE_LATEST)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("PrometheusReporter is not started")
        return int(self._server.port)

    @property
    def url(self) -> str:
        return f"{self._server.url}/metrics"

    async def start(self) -> None:
        """Bind the first free port and serve.

        Raises:
            OSError: no port of the range could be bound.
        """
        from flintlock.runtime.rest.server import RestServer

        errors = []
        for port in self._ports:
            server = RestServer(self.app, host=self.host, port=port)
            try:
                await server.start()
            except OSError as exc:
                errors.append(f"{port}: {exc.strerror or exc}")
                continue
            self._server = server
            log.info("Prometheus endpoint on %s", self.url)
            return
        raise OSError(f"Cannot start the Prometheus endpoint on {self.host}: no free port in "
                      f"metrics.reporter.prom.port ({'; '.join(errors[:3])})")

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop()
            self._server = None


async def start_prometheus_reporter(configuration: Configuration,
                                    sources: Sequence[MetricsSource]) -> PrometheusReporter | None:
    """Start the endpoint when ``metrics.reporter.prom.port`` is set; else return ``None``.

    Raises:
        OSError: no free port in the configured range.
    """
    spec = configuration.get(PROM_PORT)
    if spec is None:
        return None
    reporter = PrometheusReporter(sources, configuration.get(PROM_HOST), parse_ports(spec))
    await reporter.start()
    return reporter


def job_manager_source(dispatcher: DispatcherGateway) -> MetricsSource:
    """The JobManager's families, read from the Dispatcher on every scrape."""

    async def source() -> list[Metric]:
        overview = await dispatcher.request_cluster_overview()
        jobs = await dispatcher.list_jobs()
        return job_manager_families(overview, jobs, await run_blocking(process_stats))

    return source


def task_manager_source(task_executors: Sequence[TaskExecutorGateway]) -> MetricsSource:
    """The families of these TaskExecutors (``request_metrics``) on every scrape."""

    async def source() -> list[Metric]:
        return task_manager_families([await te.request_metrics() for te in task_executors])

    return source
