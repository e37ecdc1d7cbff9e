"""SpeculativeScheduler: an AdaptiveBatchScheduler that re-runs slow subtasks speculatively.

Follows Flink's speculative execution (fact sheet 7.5; ``SpeculativeScheduler``,
``DefaultSpeculativeExecutionHandler``, ``ExecutionTimeBasedSlowTaskDetector``), a pure core
like its parent:

- The running attempts are checked (``slowtaskdetector.find_slow_tasks``) every
  ``slow-task-detector.check-interval`` as in Flink, and also right after a subtask finished
  (a baseline may have become known) and when the next running attempt crosses its vertex's
  threshold (``next_slow_at_ms``), so a slow subtask is found as soon as it qualifies rather
  than up to one interval later: the same decisions as Flink's periodic check, sooner.
  The TaskManagers of slow attempts are blocked for
  ``execution.batch.speculative.block-slow-node-duration``: the job's slot pool gives no new
  request a slot there and returns their free slots, and the ResourceManager is told
  (``BlockNodes``), so the new attempts run elsewhere. Each slow subtask then gets new attempts
  up to ``max-concurrent-executions`` (original included), each with a slot of its own.
- The first attempt to finish wins: it becomes the subtask's representative attempt (its
  partitions and committables are the subtask's), the others are cancelled, and the job's sinks
  are committed only once every losing attempt of a vertex that writes sinks ended (a sink
  writes per attempt; the FileSink publishes the winner's directory and removes the rest).
  Losers that write only result partitions do not hold the job back: a cancelled attempt
  removes what it wrote, and those still being cancelled when the job finishes count as
  CANCELED (Flink finishes a job while such an attempt is CANCELING).
- A failed attempt whose subtask still has another attempt running is dropped without a
  failover (its failure is in the exception history); when the last one fails, the usual
  failover runs.
- A job vertex is speculated only when every sink chained into it supports concurrent attempts
  (``supports_concurrent_execution_attempts``; Flink ``SupportsConcurrentExecutionAttempts``):
  the FileSink and the collect sink do, a print sink does not.
"""

from __future__ import annotations

import logging
from typing import Any

from flintlock.config.batch_execution_options import (
    SLOW_TASK_CHECK_INTERVAL,
    SPECULATIVE_BLOCK_SLOW_NODE_DURATION,
    SPECULATIVE_MAX_CONCURRENT_EXECUTIONS,
)
from flintlock.config.configuration import Configuration
from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.executiongraph.execution import Execution
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.executiongraph.execution_vertex import ExecutionJobVertex
from flintlock.runtime.executiongraph.failover.execution_failure_handler import task_failure_entry
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus
from flintlock.runtime.scheduler.adaptivebatch.adaptive_batch_scheduler import (
    AdaptiveBatchScheduler,
    AutoParallelismSettings,
)
from flintlock.runtime.scheduler.messages import (
    BlockNodes,
    Event,
    ScheduleTimer,
    SlowTaskCheck,
    UnblockNodes,
)
from flintlock.runtime.scheduler.slowtaskdetector.execution_time_based import (
    AttemptTimes,
    SlowTaskDetectorSettings,
    VertexAttempts,
    find_slow_tasks,
    next_slow_at_ms,
)
from flintlock.runtime.taskmanager.task_execution_state import SerializedError

__all__ = ["SpeculativeScheduler", "supports_concurrent_attempts"]

log = logging.getLogger(__name__)


def supports_concurrent_attempts(job_vertex: ExecutionJobVertex) -> bool:
    """Whether every sink of the vertex's chain tolerates several attempts writing at once."""
    return all(getattr(sink, "supports_concurrent_execution_attempts", False)
               for sink in job_vertex.sinks())


def _times(execution: Execution) -> AttemptTimes:
    stamps = execution.state_timestamps
    end = next((stamps[s] for s in (ExecutionState.FINISHED, ExecutionState.FAILED,
                                    ExecutionState.CANCELED) if s in stamps), 0)
    return AttemptTimes(execution.attempt_id, execution.state,
                        stamps.get(ExecutionState.DEPLOYING, 0), end)


class SpeculativeScheduler(AdaptiveBatchScheduler):
    """AdaptiveBatchScheduler with speculative execution (see the module docstring).

    Args:
        graph, configuration, clock, settings, **kwargs: as for ``AdaptiveBatchScheduler``;
            ``configuration`` also gives ``execution.batch.speculative.*`` and
            ``slow-task-detector.*``.
    """

    def __init__(self, graph: ExecutionGraph, configuration: Configuration, clock: Any,
                 settings: AutoParallelismSettings, **kwargs: Any) -> None:
        super().__init__(graph, configuration, clock, settings, **kwargs)
        self.detector = SlowTaskDetectorSettings.from_configuration(configuration)
        self.check_interval_s: float = configuration.get(SLOW_TASK_CHECK_INTERVAL)
        self.max_concurrent: int = configuration.get(SPECULATIVE_MAX_CONCURRENT_EXECUTIONS)
        self.block_duration_s: float = configuration.get(SPECULATIVE_BLOCK_SLOW_NODE_DURATION)
        self._check_generation = 0

    # ---- events --------------------------------------------------------------------------------

    def _handle(self, event: Event) -> None:  # type: ignore[override]
        if isinstance(event, SlowTaskCheck):
            if event.generation == self._check_generation:  # a later check superseded others
                self._check_slow_tasks()
        elif isinstance(event, UnblockNodes):
            self.pool.unblock(event.resource_ids)
        else:
            super()._handle(event)

    def _on_start(self) -> None:
        super()._on_start()
        self._schedule_check(self.check_interval_s)

    def _schedule_check(self, delay_s: float) -> None:
        """The next slow-task check, in ``delay_s`` seconds; it supersedes any scheduled before."""
        self._check_generation += 1
        self._out.append(ScheduleTimer(delay_s, SlowTaskCheck(self._check_generation)))

    def _check_slow_tasks(self) -> None:
        if self.graph.state is not JobStatus.RUNNING:
            if not self.graph.state.is_globally_terminal():
                self._schedule_check(self.check_interval_s)
            return
        now_ms = self.clock.now_ms()
        vertices = [VertexAttempts(ejv.parallelism, [[_times(e) for e in v.current_executions()]
                                                     for v in ejv.task_vertices])
                    for ejv in self.graph.job_vertices.values()
                    if ejv.initialized and not ejv.all_finished()
                    and supports_concurrent_attempts(ejv)]
        slow = find_slow_tasks(vertices, self.detector, now_ms)
        if slow:
            self._speculate(slow)
        delay_s = self.check_interval_s
        next_at_ms = next_slow_at_ms(vertices, self.detector, now_ms)
        if next_at_ms is not None:
            delay_s = min(delay_s, max(0.001, (next_at_ms - now_ms) / 1000))
        self._schedule_check(delay_s)

    def _speculate(self, slow: list[ExecutionAttemptID]) -> None:
        executions = [e for e in (self.graph.find_current_execution(a) for a in slow)
                      if e is not None]
        nodes = sorted({e.slot.resource_id for e in executions if e.slot is not None}
                       - self.pool.blocked(), key=str)
        if nodes and self.block_duration_s > 0:
            cause = "slow subtasks: " + ", ".join(
                e.task_name_with_subtask() for e in executions
                if e.slot is not None and e.slot.resource_id in nodes)
            log.info("job %s: blocking slow TaskManager(s) %s for %gs (%s)", self.graph.job_id,
                     ", ".join(map(str, nodes)), self.block_duration_s, cause)
            self.pool.block(nodes)
            self._out.append(BlockNodes(tuple(nodes), self.block_duration_s, cause))
            self._out.append(ScheduleTimer(self.block_duration_s, UnblockNodes(tuple(nodes))))
        for vertex_id in dict.fromkeys(e.attempt_id.execution_vertex_id for e in executions):
            vertex = self.graph.vertex(vertex_id)
            for _ in range(self.max_concurrent - len(vertex.live_executions())):
                self._start_speculative_attempt(vertex_id)

    def _start_speculative_attempt(self, vertex_id: ExecutionVertexID) -> None:
        execution = self.graph.add_speculative_execution(vertex_id)
        log.info("job %s: speculative attempt of slow subtask %s", self.graph.job_id,
                 execution.task_name_with_subtask())
        self._transition(execution, ExecutionState.SCHEDULED, "speculative attempt of a slow subtask")
        (request,) = self._shared.add_bulk([{execution.attempt_id}])
        ssg = self.graph.vertex(vertex_id).job_vertex.job_vertex.slot_sharing_group
        request.resource_profile = self.graph.job_graph.slot_sharing_group_resources.get(
            ssg, ResourceProfile.UNKNOWN)
        slot = self.pool.request_slot(request.id, request.resource_profile)
        if slot is not None:
            self._assign(request, slot)
        self._deploy_ready_bulks()

    # ---- hooks of the DefaultScheduler ---------------------------------------------------------

    def _on_attempt_finishing(self, execution: Execution) -> None:
        if self.graph.state is JobStatus.RUNNING:
            self._schedule_check(0.0)  # a baseline may be known now
        vertex = self.graph.vertex(execution.attempt_id.execution_vertex_id)
        if not vertex.speculative_executions:
            return
        if vertex.current_execution is not execution:
            log.info("job %s: speculative attempt #%d of %s finished first", self.graph.job_id,
                     execution.attempt_number, execution.task_name_with_subtask())
            self.graph.promote(execution)
        for other in vertex.speculative_executions:
            self._cancel_execution(other)

    def _fail_locally(self, execution: Execution, error: SerializedError) -> bool:
        vertex = self.graph.vertex(execution.attempt_id.execution_vertex_id)
        others = [e for e in vertex.live_executions() if e is not execution]
        if not others or error.partition_not_found:
            return False
        self._transition(execution, ExecutionState.FAILED, error.short())
        execution.failure = error
        self.graph.record_failure(task_failure_entry(execution, error, self.clock.now_ms()))
        if vertex.current_execution is execution:
            self.graph.promote(others[0])
        self._release_slot_share(execution)
        self._on_terminal(execution)
        return True

    def _on_terminal(self, execution: Execution) -> None:
        vertex = self.graph.vertex(execution.attempt_id.execution_vertex_id)
        vertex.archive_ended_speculative()
        super()._on_terminal(execution)

    def _finish(self) -> None:
        """Every subtask FINISHED and no loser writes sinks: the losers still being cancelled
        (their cancel was sent; they remove the result partitions they wrote) count as
        CANCELED, and their slots go back with the job's, as in Flink, whose job finishes
        while a speculative attempt of a finished subtask is still CANCELING."""
        for execution in self.graph.live_speculative_executions():
            self._transition(execution, ExecutionState.CANCELED,
                             "lost to another attempt; the job finished before it ended")
            self._release_slot_share(execution)
            self.graph.vertex(execution.attempt_id.execution_vertex_id).archive_ended_speculative()
        super()._finish()
