"""Metrics with Flink's names: task I/O and busy time, TaskManager and JobManager gauges, and a
Prometheus endpoint per process.

- ``task_metrics``: per-attempt task metrics and the REST metric query helpers (pure).
- ``task_manager_metrics``: ``TaskMetricStore`` (TaskExecutor side) and its snapshot.
- ``job_manager_metrics``: the JobManager's gauges.
- ``process``: the Python process's memory, CPU time and threads.
- ``prometheus``: Flink-style Prometheus metric families and the HTTP endpoint
  (``metrics.reporter.prom.port``).
"""

from __future__ import annotations

__all__: list[str] = []
