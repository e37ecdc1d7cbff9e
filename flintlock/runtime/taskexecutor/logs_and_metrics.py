"""What a TaskExecutor keeps for observability: its log files and its tasks' metrics.

- Log files: ``services["logs"]`` (the TaskManager process's ``LogDirectory``, with its process
  log) or, when absent (a MiniCluster), a directory of its own: ``env.log.dir`` when set, else a
  temporary directory removed by ``close()``. Tasks find it as ``services["task_logs"]`` and write
  their per-attempt task logs into it.
- Task metrics: a ``TaskMetricStore`` fed with every deployment, state change and live report;
  snapshots add the process's ``Status.*`` metrics (``process_status.task_manager_status``).
- Thread dumps: the process's Python threads, then its embedded Spark server JVM's
  (``spark.jvm_thread_dump``).

Used only from the TaskExecutor's mailbox (file reads run in a worker thread).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flintlock.config.configuration import Configuration
from flintlock.config.options import FAULT_TASK_SLOWDOWN, FAULT_TASK_SLOWDOWN_MODE, LOG_DIR
from flintlock.runtime.concurrency import run_blocking
from flintlock.runtime.deployment import TaskDeploymentDescriptor
from flintlock.runtime.logs.files import LogChunk, LogDirectory, LogInfo
from flintlock.runtime.metrics.process import ProcessStats, process_stats
from flintlock.runtime.metrics.task_manager_metrics import (
    TaskManagerMetricsSnapshot,
    TaskMetricStore,
)
from flintlock.runtime.spark.jvm_thread_dump import embedded_jvm_thread_dump
from flintlock.runtime.taskexecutor.process_status import task_manager_status
from flintlock.runtime.taskmanager.task_execution_state import TaskExecutionState
from flintlock.runtime.thread_dump import ThreadInfo, thread_dump

__all__ = ["TaskExecutorLogsAndMetrics"]


def _read_process() -> tuple[ProcessStats, dict[str, float]]:
    return process_stats(), task_manager_status()


def _threads(max_depth: int) -> tuple[ThreadInfo, ...]:
    return thread_dump(max_depth) + embedded_jvm_thread_dump(max_depth)


class TaskExecutorLogsAndMetrics:
    """Log files and task metrics of one TaskExecutor.

    Args:
        services: the TaskManager services (``"logs"`` is used when present).
        configuration: ``env.log.dir``.
    """

    def __init__(self, services: Mapping[str, Any], configuration: Configuration) -> None:
        given = services.get("logs")
        self._owns_logs = not isinstance(given, LogDirectory)
        if isinstance(given, LogDirectory):
            self.logs = given
        elif configuration.get(LOG_DIR):
            self.logs = LogDirectory(configuration.get(LOG_DIR))
        else:
            self.logs = LogDirectory.temporary("flintlock-taskmanager-logs-")
        #: the services handed to tasks: the TaskManager's, plus where task logs go and the
        #: injected slowdown of a TaskManager made slow on purpose (``FAULT_TASK_SLOWDOWN``; in
        #: its ``throttle`` mode the TaskManager's entrypoint slows its Spark server instead)
        waits = configuration.get(FAULT_TASK_SLOWDOWN_MODE) == "wait"
        self.task_services: Mapping[str, Any] = {
            **services, "task_logs": self.logs,
            "task_slowdown": configuration.get(FAULT_TASK_SLOWDOWN) if waits else 1.0}
        self.task_metrics = TaskMetricStore()

    def task_deployed(self, tdd: TaskDeploymentDescriptor) -> None:
        self.task_metrics.task_deployed(tdd)

    def task_state_changed(self, state: TaskExecutionState, now_ms: int) -> None:
        io = state.result.metrics if state.result is not None else state.metrics
        self.task_metrics.task_state_changed(state.job_id, state.attempt_id, state.state, io, now_ms)

    async def log_list(self) -> tuple[LogInfo, ...]:
        return await run_blocking(self.logs.list_logs)

    async def log(self, name: str | None, start: int, count: int) -> LogChunk:
        return await run_blocking(self.logs.read, name, int(start), int(count))

    async def thread_dump(self, max_depth: int) -> tuple[ThreadInfo, ...]:
        """The process's Python threads, then its embedded Spark JVM's (read in a worker
        thread: Py4J calls), each with at most ``max_depth`` frames."""
        return await run_blocking(_threads, max_depth)

    async def snapshot(self, resource_id: str, now_ms: int, slots_total: int,
                       slots_available: int, running_tasks: int) -> TaskManagerMetricsSnapshot:
        """The TaskManager's metrics now; the process and its ``Status.*`` values are read in a
        worker thread (/proc files, Py4J calls to an embedded Spark server)."""
        tasks = self.task_metrics.samples()
        process, status = await run_blocking(_read_process)
        return TaskManagerMetricsSnapshot(
            resource_id=resource_id, now_ms=now_ms, process=process,
            slots_total=slots_total, slots_available=slots_available,
            running_tasks=running_tasks, tasks=tasks, status=status,
        )

    def close(self) -> None:
        """Remove the log directory if it is this TaskExecutor's own temporary one."""
        if self._owns_logs:
            self.logs.close()
