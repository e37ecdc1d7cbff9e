"""Pipeline executors: where ``env.execute()`` sends a compiled JobGraph.

``execution.target`` picks the executor (Flink ``PipelineExecutor``): ``local`` (default) runs the
job on an in-process MiniCluster; ``remote`` submits it to a session cluster over REST
(``flintlock.client.remote``); ``embedded`` submits it to the Dispatcher of the application
cluster whose JobManager runs the program (``flintlock.client.application``, Flink's
``EmbeddedExecutor``); ``per-job`` starts a JobManager for the job and submits it there
(``flintlock.client.per_job``).

The local MiniCluster lives as long as the program: the first ``execute()`` starts it (and the
process's Spark Connect session, ~5 s), later ``execute()`` calls reuse both, and the process's exit
closes them. Flink starts a MiniCluster per job; here the Spark session start dominates, so one
cluster per program is kept (see ``docs/design.md``). A job whose parallelism needs more slots than
the running cluster has gets a new MiniCluster (the Spark session is kept).
"""

from __future__ import annotations

import atexit
import logging
import math
import threading
from collections.abc import Callable
from typing import Any

from flintlock.client.context import ProgramPlanCaptured, current_context
from flintlock.client.job_client import (
    JobExecutionResult,
    PollingJobClient,
    wait_for_savepoint,
)
from flintlock.client.progress import stderr_console
from flintlock.config import Configuration, IllegalConfigurationException
from flintlock.config.options import EXECUTION_TARGET, LOCAL_TASKMANAGERS, TASK_SLOTS
from flintlock.runtime.concurrency import LoopThread
from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph, JobResult
from flintlock.runtime.ids import JobID
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import JobStatus

__all__ = ["DispatcherJobClient", "LocalExecutor", "execute_job"]

log = logging.getLogger(__name__)


def execute_job(job_graph: JobGraph, configuration: Configuration) -> Any:
    """Run ``job_graph`` where ``execution.target`` says; returns a JobClient.

    Under ``flintlock info`` (plan-only mode) the JobGraph is recorded and ``ProgramPlanCaptured``
    is raised instead.

    Raises:
        IllegalConfigurationException: an unsupported target.
    """
    ctx = current_context()
    if ctx.capture_plans is not None:
        ctx.capture_plans.append(job_graph)
        raise ProgramPlanCaptured()
    target = configuration.get(EXECUTION_TARGET)
    if target == "remote":
        from flintlock.client.remote import submit_remote

        client: Any = submit_remote(job_graph, configuration, ctx.progress_enabled())
    elif target == "per-job":
        from flintlock.client.per_job import submit_per_job

        client = submit_per_job(job_graph, ctx.overrides, configuration, ctx.progress_enabled(),
                                ctx.detached)
    elif target == "embedded":
        if ctx.embedded is None:
            raise IllegalConfigurationException(
                "execution.target: embedded runs jobs on the application cluster the program "
                "runs in; start one with `flintlock run --target application program.py`")
        client = ctx.embedded.execute(job_graph, configuration)
    else:
        client = _local_executor().execute(job_graph, configuration)
    job_id = getattr(client, "job_id", job_graph.job_id)  # an application's stable id under HA
    ctx.submitted.append(str(job_id))
    if ctx.detached:
        stderr_console().print(f"Job has been submitted with JobID {job_id}")
        return DetachedJobClient(client)
    return client


class DetachedJobClient:
    """``flintlock run -d``: ``execute()`` returns at once; results are not awaited."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def get_job_execution_result(self, timeout_s: float | None = None) -> JobExecutionResult:
        return JobExecutionResult(self._client.job_id, -1, {})


_LOCAL: LocalExecutor | None = None
_LOCAL_LOCK = threading.Lock()


def _local_executor() -> LocalExecutor:
    global _LOCAL
    with _LOCAL_LOCK:
        if _LOCAL is None:
            _LOCAL = LocalExecutor()
            atexit.register(_LOCAL.close)
        return _LOCAL


class LocalExecutor:
    """Runs jobs on an in-process MiniCluster driven from a background loop thread."""

    def __init__(self) -> None:
        self._loop: LoopThread | None = None
        self._cluster: Any = None
        self._cluster_key: tuple[Any, ...] | None = None
        self._spark: Any = None
        self._lock = threading.Lock()

    def _ensure_cluster(self, job_graph: JobGraph, configuration: Configuration) -> Any:
        from flintlock.runtime.minicluster import MiniCluster

        tms = configuration.get(LOCAL_TASKMANAGERS)
        max_par = max((v.parallelism for v in job_graph.vertices), default=1)
        slots = (
            configuration.get(TASK_SLOTS)
            if configuration.contains(TASK_SLOTS)
            else max(1, math.ceil(max_par / tms))
        )
        spark_key = tuple(sorted(configuration.spark_settings().items())) + (
            configuration.get_raw("spark.remote"),
        )
        key = (tms, slots, spark_key)
        if self._cluster is not None and self._cluster_key is not None:
            old_tms, old_slots, old_spark = self._cluster_key
            if old_spark == spark_key and old_tms * old_slots >= tms * slots and old_tms == tms:
                return self._cluster
            self._loop_thread().run(self._cluster.close())
            self._cluster = None
        if self._spark is None or (self._cluster_key and self._cluster_key[2] != spark_key):
            if self._spark is not None:
                self._spark.stop()
            from flintlock.runtime.spark.session import SparkSessionProvider

            self._spark = SparkSessionProvider(configuration)
        cluster = MiniCluster(
            configuration,
            num_task_managers=tms,
            slots_per_task_manager=slots,
            services={"spark": self._spark},
            warm_up_spark=True,
        )
        self._loop_thread().run(cluster.start())
        self._cluster, self._cluster_key = cluster, key
        return cluster

    def _loop_thread(self) -> LoopThread:
        if self._loop is None:
            self._loop = LoopThread("flintlock-local-cluster")
        return self._loop

    def execute(self, job_graph: JobGraph, configuration: Configuration) -> DispatcherJobClient:
        with self._lock:
            cluster = self._ensure_cluster(job_graph, configuration)
            loop = self._loop_thread()
            loop.run(cluster.submit_job(job_graph))
        return DispatcherJobClient(loop.run, cluster.dispatcher_gateway, job_graph.job_id,
                                   job_graph.name, current_context().progress_enabled())

    def close(self) -> None:
        with self._lock:
            if self._cluster is not None and self._loop is not None:
                try:
                    self._loop.run(self._cluster.close(), timeout_s=60)
                except Exception:  # exiting: best effort
                    log.exception("closing the local cluster failed")
                self._cluster = None
            if self._spark is not None:
                try:
                    self._spark.stop()
                except Exception:
                    log.debug("stopping Spark failed", exc_info=True)
                self._spark = None
            if self._loop is not None:
                self._loop.stop()
                self._loop = None


class DispatcherJobClient(PollingJobClient):
    """JobClient for a job of a Dispatcher in this process: the local MiniCluster's, or the
    application cluster's own (``embedded``). All calls are synchronous.

    Args:
        run: runs a Dispatcher call (a coroutine) on the Dispatcher's event loop and returns
            its result.
        dispatcher: the DispatcherGateway.
    """

    def __init__(self, run: Callable[[Any], Any], dispatcher: Any, job_id: JobID, job_name: str,
                 show_progress: bool) -> None:
        super().__init__(job_id, job_name, show_progress)
        self._run = run
        self._dispatcher = dispatcher

    def get_job_status(self) -> JobStatus:
        return self._run(self._dispatcher.request_job_status(self._job_id))

    def get_job_details(self) -> ArchivedExecutionGraph:
        return self._run(self._dispatcher.request_job(self._job_id))

    def cancel(self) -> None:
        self._run(self._dispatcher.cancel_job(self._job_id))

    def send_coordination_request(self, operator_id: str, request: dict[str, Any]) -> dict[str, Any]:
        return self._run(self._dispatcher.deliver_coordination_request(
            self._job_id, operator_id, request))

    def trigger_savepoint(self, target_directory: str | None = None, cancel_job: bool = False,
                          timeout_s: float = 600.0) -> str:
        trigger = self._run(self._dispatcher.trigger_savepoint(self._job_id, target_directory,
                                                               cancel_job))
        return wait_for_savepoint(
            lambda: self._run(self._dispatcher.savepoint_status(self._job_id, trigger)), timeout_s)

    def stop_with_savepoint(self, target_directory: str | None = None, drain: bool = False,
                            timeout_s: float = 600.0) -> str:
        trigger = self._run(self._dispatcher.stop_with_savepoint(self._job_id, target_directory,
                                                                 drain))
        return wait_for_savepoint(
            lambda: self._run(self._dispatcher.savepoint_status(self._job_id, trigger)), timeout_s)

    def _result(self, wait_s: float = 0.0) -> JobResult | None:
        return self._run(self._dispatcher.request_job_result(self._job_id, wait_s))
