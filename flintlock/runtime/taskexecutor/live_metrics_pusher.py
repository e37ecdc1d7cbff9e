"""The TaskExecutor's push of live streaming-task metrics to JobMasters (an I/O shell).

Every ``metrics.task.report-interval`` the pusher samples the running tasks that expose live
counters (``Task.live_stats``), turns them into ``LiveTaskMetrics`` with
``LiveMetricsReporter`` and sends each job's batch to its JobMaster
(``JobMasterGateway.update_task_metrics``, one-way: a lost report is replaced by the next), and
hands each to ``record`` (the TaskExecutor's own metric store, which its Prometheus endpoint and
``/taskmanagers/:id/metrics`` read). Runs in the TaskExecutor's mailbox; re-arms itself until
stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flintlock.runtime.ids import JobID
from flintlock.runtime.metrics.live_task_metrics import LiveMetricsReporter, LiveTaskMetrics

__all__ = ["LiveMetricsPusher"]


class LiveMetricsPusher:
    """Args: ``endpoint`` (``schedule`` / ``run_async``), ``interval_s``, ``tasks()`` -> the
    running ``Task`` objects, ``gateway(job_id)`` -> the job's JobMaster gateway or None,
    ``resource_id``, ``now_ms()`` and optionally ``record(job_id, metrics)``, called with every
    sample."""

    def __init__(self, endpoint: Any, interval_s: float, tasks: Callable[[], list[Any]],
                 gateway: Callable[[JobID], Any], resource_id: Any,
                 now_ms: Callable[[], int],
                 record: Callable[[JobID, LiveTaskMetrics], None] | None = None) -> None:
        self._endpoint, self._interval_s = endpoint, max(0.05, interval_s)
        self._tasks, self._gateway = tasks, gateway
        self._resource_id, self._now_ms = resource_id, now_ms
        self._record = record
        self._reporter = LiveMetricsReporter()
        self._started: dict[Any, int] = {}
        self._timer: Any = None
        self._stopped = False

    def start(self) -> None:
        self._timer = self._endpoint.schedule(self._interval_s, self._tick)

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()

    def _tick(self) -> None:
        if self._stopped:
            return
        try:
            self.push()
        finally:
            self._timer = self._endpoint.schedule(self._interval_s, self._tick)

    def push(self) -> dict[JobID, list[LiveTaskMetrics]]:
        """Sample and send now; returns what was sent per job."""
        now = self._now_ms()
        batches: dict[JobID, list[LiveTaskMetrics]] = {}
        live = set()
        for task in self._tasks():
            stats = task.live_stats
            if stats is None:
                continue
            attempt = task.attempt_id
            live.add(attempt)
            started = self._started.setdefault(attempt, now - int(self._interval_s * 1000))
            sample = self._reporter.sample(attempt, stats, now, started)
            batches.setdefault(task.job_id, []).append(sample)
            if self._record is not None:
                self._record(task.job_id, sample)
        self._reporter.retain(live)
        for attempt in [a for a in self._started if a not in live]:
            del self._started[attempt]
        for job_id, metrics in batches.items():
            gateway = self._gateway(job_id)
            if gateway is not None:
                self._endpoint.run_async(
                    gateway.update_task_metrics(self._resource_id, tuple(metrics)))
        return batches
