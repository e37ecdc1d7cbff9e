"""Flink REST v1 bodies for what the web dashboard asks about and flintlock does not have
(pure functions, no I/O): user accumulators and flame graphs.

flintlock tasks keep no user accumulators (the collect sinks' result accumulators go to the
JobResult, ``/jobs/:jobid/execution-result``), so every accumulator list is empty; ids,
parallelism, subtask indices, attempt numbers and endpoints are the real ones. Shapes follow
Flink 2.1's ``rest/messages``:

- ``GET /jobs/:jobid/accumulators`` (``JobAccumulatorsInfo``)::

      {"job-accumulators": [], "user-task-accumulators": [],
       "serialized-user-task-accumulators": {}}

- ``GET .../vertices/:vid/accumulators`` (``JobVertexAccumulatorsInfo``)::

      {"id": "<vertex id>", "user-accumulators": []}

- ``GET .../vertices/:vid/subtasks/accumulators`` (``SubtasksAllAccumulatorsInfo``; one entry per
  current attempt, ``endpoint`` "(unassigned)" before deployment; ``host`` repeats it for the
  Flink 2.0/2.1 dashboard, see ``messages_vertices``)::

      {"id": "<vertex id>", "parallelism": 2,
       "subtasks": [{"subtask": 0, "attempt": 0, "endpoint": "<tm>", "host": "<tm>",
                     "user-accumulators": []}]}

- ``GET .../subtasks/:i/attempts/:a/accumulators`` (``SubtaskExecutionAttemptAccumulatorsInfo``;
  ``id`` is the execution attempt id)::

      {"subtask": 0, "attempt": 1, "id": "<attempt id>", "user-accumulators": []}

- ``GET .../vertices/:vid/flamegraph`` (``VertexFlameGraph``): flintlock samples no thread
  stacks, so it answers what Flink answers with ``rest.flamegraph.enabled: false`` (its
  ``DisabledJobVertexFlameGraphHandler``), ``{"endTimestamp": -2}`` (``VertexFlameGraph.disabled()``;
  ``data`` is left out as Flink leaves out nulls), which the dashboard shows as "flame graphs
  disabled".
"""

from __future__ import annotations

from typing import Any

from flintlock.runtime.executiongraph.archived import ArchivedExecution, ArchivedJobVertex

__all__ = [
    "FLAME_GRAPH_DISABLED",
    "FLAME_GRAPH_TYPES",
    "job_accumulators_info",
    "subtask_attempt_accumulators_info",
    "subtasks_all_accumulators_info",
    "vertex_accumulators_info",
    "vertex_flame_graph_disabled",
]

_UNASSIGNED = "(unassigned)"
#: ``VertexFlameGraph.disabled()``'s end timestamp (-1: terminated, -3: waiting for samples)
FLAME_GRAPH_DISABLED = -2
#: Flink's ``FlameGraphTypeQueryParameter.Type`` (the query value is case-insensitive)
FLAME_GRAPH_TYPES = ("FULL", "ON_CPU", "OFF_CPU")


def job_accumulators_info() -> dict[str, Any]:
    """``GET /jobs/:jobid/accumulators`` (Flink ``JobAccumulatorsInfo``): no accumulators."""
    return {"job-accumulators": [], "user-task-accumulators": [],
            "serialized-user-task-accumulators": {}}


def vertex_accumulators_info(vertex: ArchivedJobVertex) -> dict[str, Any]:
    """``GET .../vertices/:vid/accumulators`` (Flink ``JobVertexAccumulatorsInfo``)."""
    return {"id": str(vertex.id), "user-accumulators": []}


def subtasks_all_accumulators_info(vertex: ArchivedJobVertex) -> dict[str, Any]:
    """``GET .../vertices/:vid/subtasks/accumulators`` (Flink ``SubtasksAllAccumulatorsInfo``):
    the current attempt of each subtask, by subtask index."""
    subtasks = []
    for execution in sorted(vertex.subtasks, key=lambda e: e.subtask_index):
        endpoint = execution.task_manager or _UNASSIGNED
        subtasks.append({
            "subtask": execution.subtask_index,
            "attempt": execution.attempt_number,
            "endpoint": endpoint,
            "host": endpoint,
            "user-accumulators": [],
        })
    return {"id": str(vertex.id), "parallelism": vertex.parallelism, "subtasks": subtasks}


def subtask_attempt_accumulators_info(execution: ArchivedExecution) -> dict[str, Any]:
    """``GET .../subtasks/:i/attempts/:a/accumulators``
    (Flink ``SubtaskExecutionAttemptAccumulatorsInfo``)."""
    return {
        "subtask": execution.subtask_index,
        "attempt": execution.attempt_number,
        "id": str(execution.attempt_id),
        "user-accumulators": [],
    }


def vertex_flame_graph_disabled() -> dict[str, Any]:
    """``GET .../vertices/:vid/flamegraph``: Flink's ``VertexFlameGraph.disabled()``."""
    return {"endTimestamp": FLAME_GRAPH_DISABLED}
