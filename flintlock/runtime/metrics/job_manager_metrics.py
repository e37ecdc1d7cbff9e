"""A JobManager's metrics with Flink's names (``/jobmanager/metrics``, Prometheus).

``numRegisteredTaskManagers``, ``taskSlotsTotal``, ``taskSlotsAvailable``, ``numRunningJobs``
(Flink's ``JobManagerMetricGroup`` gauges), plus ``numFinishedJobs``, ``numFailedJobs``,
``numCancelledJobs`` (flintlock additions; jobs the Dispatcher still keeps) and the process's
``Status.Python.*``.
"""

from __future__ import annotations

from flintlock.runtime.dispatcher.gateway import ClusterOverview
from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.runtime.metrics.process import ProcessStats, process_metric_values

__all__ = ["job_manager_metric_values", "job_metric_values"]


def job_manager_metric_values(overview: ClusterOverview, process: ProcessStats) -> dict[str, float]:
    """Metric name -> value."""
    r = overview.resources
    return {
        "numRunningJobs": float(overview.jobs_running),
        "numFinishedJobs": float(overview.jobs_finished),
        "numFailedJobs": float(overview.jobs_failed),
        "numCancelledJobs": float(overview.jobs_cancelled),
        "taskSlotsTotal": float(r.number_of_slots),
        "taskSlotsAvailable": float(r.number_of_free_slots),
        "numRegisteredTaskManagers": float(r.number_of_task_managers),
        **process_metric_values(process),
    }


def job_metric_values(graph: ArchivedExecutionGraph, now_ms: int) -> dict[str, float]:
    """Job-scope metrics of one job (Flink ``JobManagerJobMetricGroup``).

    ``numRestarts`` (count of restarts, Flink ``RestartTimeGauge``'s sibling ``numRestarts``),
    ``uptime`` (ms RUNNING since the job's last transition to RUNNING, 0 when not running) and
    ``restartingTime`` (ms spent in the current RESTARTING phase, 0 otherwise).
    """
    since = int(graph.state_timestamps.get(graph.state.name, now_ms))
    return {
        "numRestarts": float(graph.number_of_restarts),
        "uptime": float(now_ms - since) if graph.state is JobStatus.RUNNING else 0.0,
        "restartingTime": float(now_ms - since) if graph.state is JobStatus.RESTARTING else 0.0,
    }
