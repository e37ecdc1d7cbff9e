"""Checkpoint handlers: ``/jobs/:jobid/checkpoints``, ``/checkpoints/config``,
``/checkpoints/details/:checkpointid`` and ``.../subtasks/:vertexid`` (Flink
``CheckpointingStatisticsHandler``, ``CheckpointConfigHandler``,
``CheckpointStatisticDetailsHandler``, ``TaskCheckpointStatisticDetailsHandler``).

They read the ``CheckpointStatsSnapshot`` the JobMaster puts in the job's
``ArchivedExecutionGraph`` (``checkpoint_stats``; None for a job that does not checkpoint).
Timestamps are epoch ms, durations ms, sizes bytes; ``-1`` is "none yet" (see
``flintlock.runtime.checkpoint.stats``). Shapes (Flink's wire names):

- ``GET /jobs/:jobid/checkpoints`` (``CheckpointingStatistics``)::

    {"counts": {"restored", "total", "in_progress", "completed", "failed"},
     "summary": {"checkpointed_size" | "state_size" | "end_to_end_duration" | "alignment_buffered"
                 | "processed_data" | "persisted_data":
                 {"min", "max", "avg", "p50", "p90", "p95", "p99", "p999"}},
     "latest": {"completed": <checkpoint> | null, "savepoint": <checkpoint> | null,
                "failed": <checkpoint> | null,
                "restored": {"id", "restore_timestamp", "is_savepoint", "external_path"} | null},
     "history": [<checkpoint>, ...]}                                       (newest first)

  The summary covers the completed checkpoints of the history; alignment, processed and persisted
  data are zeros (flintlock has no unaligned checkpoints). A job that does not checkpoint answers
  these statistics empty (all counts 0, no history, latest all null).

- a ``<checkpoint>`` (``CheckpointStatistics`` and its completed / failed / in_progress
  subtypes)::

    {"className": "completed" | "failed" | "in_progress", "id", "status", "is_savepoint",
     "savepointFormat": null | "NATIVE", "trigger_timestamp", "latest_ack_timestamp",
     "checkpointed_size", "state_size", "end_to_end_duration", "alignment_buffered": 0,
     "processed_data": 0, "persisted_data": 0, "num_subtasks", "num_acknowledged_subtasks",
     "checkpoint_type": "CHECKPOINT" | "SAVEPOINT", "tasks": {<vertex id>: <task>},
     + completed: "external_path", "discarded"
     + failed: "failure_timestamp", "failure_message"}

  ``tasks`` is ``{}`` in ``/checkpoints`` (as in Flink) and filled in the details. A ``<task>``
  (``TaskCheckpointStatistics``): ``{"id", "status", "latest_ack_timestamp", "checkpointed_size",
  "state_size", "end_to_end_duration", "alignment_buffered", "processed_data", "persisted_data",
  "num_subtasks", "num_acknowledged_subtasks"}`` (``latest_ack_timestamp`` and
  ``end_to_end_duration`` are ``-1`` before its first acknowledgement).

- ``GET /jobs/:jobid/checkpoints/config`` (``CheckpointConfigInfo``)::

    {"mode": "exactly_once" | "at_least_once", "interval", "timeout", "min_pause" (ms),
     "max_concurrent", "externalization": {"enabled", "delete_on_cancellation"},
     "state_backend": "hashmap", "checkpoint_storage": "FileSystemCheckpointStorage",
     "unaligned_checkpoints": false, "tolerable_failed_checkpoints",
     "aligned_checkpoint_timeout": 0, "checkpoints_after_tasks_finish": true,
     "state_changelog_enabled": false, "changelog_periodic_materialization_interval": -1,
     "changelog_storage": "memory"}

  ``externalization`` says what the JobMaster does: checkpoints outlive a cancelled or failed job
  only with ``RETAIN_ON_CANCELLATION`` (enabled, not deleted on cancellation); otherwise they are
  deleted when the job ends. A job that does not checkpoint (a BATCH job) answers Flink's
  configuration of a job whose periodic checkpoints are off, the defaults with ``interval``
  Long.MAX_VALUE: Flink's StreamingJobGraphGenerator gives every DataStream job checkpoint
  settings, and its dashboard shows "Periodic checkpoints disabled".

- ``GET /jobs/:jobid/checkpoints/details/:checkpointid``: one ``<checkpoint>`` with its
  ``tasks``; 404 "Could not find checkpointing statistics for checkpoint <n>." when it is neither
  in the history nor one of the latest, 404 "Checkpointing was not enabled for job <jobid>." for a
  job that does not checkpoint, 400 for an id that is not an integer.

- ``GET /jobs/:jobid/checkpoints/details/:checkpointid/subtasks/:vertexid``
  (``TaskCheckpointStatisticsWithSubtaskDetails``): the vertex's ``<task>`` plus::

    "summary": {"state_size" | "checkpointed_size" | "end_to_end_duration" | "start_delay":
                <StatsSummaryDto>, "checkpoint_duration": {"sync", "async"},
                "alignment": {"buffered", "processed", "persisted", "duration"}},
    "subtasks": [{"className": "completed", "index", "status": "completed", "ack_timestamp",
                  "end_to_end_duration", "state_size", "checkpointed_size",
                  "checkpoint": {"sync", "async"}, "alignment": {"buffered", "processed",
                  "persisted", "duration"}, "start_delay", "unaligned_checkpoint": false,
                  "aborted": false}
                 | {"className": "pending", "index", "status": "pending_or_failed"}, ...]

  over the acknowledged subtasks. flintlock snapshots between epochs, synchronously: the whole
  duration counts as ``sync``, ``async`` and alignment are 0 and the start delay is not known
  (0). 404 for a vertex that is not part of the checkpoint.
"""

from __future__ import annotations

from typing import Any

from flintlock.runtime.checkpoint.coordinator import CheckpointSettings
from flintlock.runtime.checkpoint.stats import (
    COMPLETED,
    FAILED,
    ArchivedCheckpointStats,
    CheckpointCoordinatorConfiguration,
    CheckpointStatsSnapshot,
    StatsSummary,
    TaskStateStats,
    summarize,
)
from flintlock.runtime.ids import JobID, JobVertexID
from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.routing import Ctx, RestContext, new_router, parse_id

__all__ = [
    "checkpoint_config_info",
    "checkpoint_statistics",
    "checkpointing_statistics",
    "router",
    "subtask_checkpoint_statistics",
]

router = new_router()

_CHECKPOINTS = "/jobs/{jobid}/checkpoints"
_CLASS_NAMES = {COMPLETED: "completed", FAILED: "failed"}
#: a savepoint is the same files as a checkpoint (``_metadata`` plus the copied state tables)
_SAVEPOINT_FORMAT = "NATIVE"


# ---- bodies (pure) ----------------------------------------------------------------------------------


def _summary_dto(summary: StatsSummary) -> dict[str, Any]:
    """Flink ``StatsSummaryDto``: min / max / avg (long) and percentiles (double)."""
    return {"min": summary.min, "max": summary.max, "avg": summary.avg, "p50": summary.p50,
            "p90": summary.p90, "p95": summary.p95, "p99": summary.p99, "p999": summary.p999}


def _task_statistics(s: ArchivedCheckpointStats, t: TaskStateStats) -> dict[str, Any]:
    """Flink ``TaskCheckpointStatistics``."""
    return {
        "id": s.checkpoint_id, "status": s.status,
        "latest_ack_timestamp": t.latest_ack_timestamp_ms,
        "checkpointed_size": t.checkpointed_size, "state_size": t.state_size,
        "end_to_end_duration": t.end_to_end_duration_ms(s.trigger_timestamp_ms),
        "alignment_buffered": 0, "processed_data": 0, "persisted_data": 0,
        "num_subtasks": t.num_subtasks, "num_acknowledged_subtasks": t.num_acknowledged,
    }


def subtask_checkpoint_statistics(s: ArchivedCheckpointStats,
                                  t: TaskStateStats) -> dict[str, Any]:
    """One vertex of a checkpoint with its subtasks (Flink
    ``TaskCheckpointStatisticsWithSubtaskDetails``; see the module docstring)."""
    acked = {a.index: a for a in t.subtasks}
    durations = [max(0, a.ack_timestamp_ms - s.trigger_timestamp_ms) for a in t.subtasks]
    sizes = [a.state_size for a in t.subtasks]
    zeros = _summary_dto(summarize(0 for _ in t.subtasks))
    subtasks: list[dict[str, Any]] = []
    for index in range(t.num_subtasks):
        a = acked.get(index)
        if a is None:
            subtasks.append({"className": "pending", "index": index,
                             "status": "pending_or_failed"})
            continue
        duration = max(0, a.ack_timestamp_ms - s.trigger_timestamp_ms)
        subtasks.append({
            "className": "completed", "index": index, "status": "completed",
            "ack_timestamp": a.ack_timestamp_ms, "end_to_end_duration": duration,
            "state_size": a.state_size, "checkpointed_size": a.state_size,
            "checkpoint": {"sync": duration, "async": 0},
            "alignment": {"buffered": 0, "processed": 0, "persisted": 0, "duration": 0},
            "start_delay": 0, "unaligned_checkpoint": False, "aborted": False,
        })
    return {
        **_task_statistics(s, t),
        "summary": {
            "state_size": _summary_dto(summarize(sizes)),
            "checkpointed_size": _summary_dto(summarize(sizes)),
            "end_to_end_duration": _summary_dto(summarize(durations)),
            "checkpoint_duration": {"sync": _summary_dto(summarize(durations)),
                                    "async": dict(zeros)},
            "alignment": {k: dict(zeros) for k in ("buffered", "processed", "persisted",
                                                   "duration")},
            "start_delay": dict(zeros),
        },
        "subtasks": subtasks,
    }


def checkpoint_statistics(s: ArchivedCheckpointStats, include_tasks: bool) -> dict[str, Any]:
    """One checkpoint (Flink ``CheckpointStatistics.generateCheckpointStatistics``)."""
    tasks: dict[str, Any] = {}
    if include_tasks:
        for t in s.tasks:
            tasks[t.job_vertex_id] = _task_statistics(s, t)
    body: dict[str, Any] = {
        "className": _CLASS_NAMES.get(s.status, "in_progress"),
        "id": s.checkpoint_id,
        "status": s.status,
        "is_savepoint": s.savepoint,
        "savepointFormat": _SAVEPOINT_FORMAT if s.savepoint else None,
        "trigger_timestamp": s.trigger_timestamp_ms,
        "latest_ack_timestamp": s.latest_ack_timestamp_ms,
        "checkpointed_size": s.checkpointed_size,
        "state_size": s.state_size,
        "end_to_end_duration": s.end_to_end_duration_ms,
        "alignment_buffered": 0,
        "processed_data": 0,
        "persisted_data": 0,
        "num_subtasks": s.num_subtasks,
        "num_acknowledged_subtasks": s.num_acknowledged,
        "checkpoint_type": "SAVEPOINT" if s.savepoint else "CHECKPOINT",
        "tasks": tasks,
    }
    if s.status == COMPLETED:
        body["external_path"] = s.external_path
        body["discarded"] = s.discarded
    elif s.status == FAILED:
        body["failure_timestamp"] = s.failure_timestamp_ms
        body["failure_message"] = s.failure_message
    return body


def checkpointing_statistics(stats: CheckpointStatsSnapshot | None) -> dict[str, Any]:
    """``/jobs/:jobid/checkpoints`` (Flink ``CheckpointingStatistics``); empty without stats."""
    stats = stats or CheckpointStatsSnapshot()
    zeros = _summary_dto(StatsSummary())

    def latest(s: ArchivedCheckpointStats | None) -> dict[str, Any] | None:
        return None if s is None else checkpoint_statistics(s, include_tasks=False)

    restored = stats.latest_restored
    return {
        "counts": {"restored": stats.counts.restored, "total": stats.counts.total,
                   "in_progress": stats.counts.in_progress,
                   "completed": stats.counts.completed, "failed": stats.counts.failed},
        "summary": {
            "checkpointed_size": _summary_dto(stats.checkpointed_size_summary()),
            "state_size": _summary_dto(stats.state_size_summary()),
            "end_to_end_duration": _summary_dto(stats.end_to_end_duration_summary()),
            "alignment_buffered": dict(zeros),
            "processed_data": dict(zeros),
            "persisted_data": dict(zeros),
        },
        "latest": {
            "completed": latest(stats.latest_completed),
            "savepoint": latest(stats.latest_savepoint),
            "failed": latest(stats.latest_failed),
            "restored": None if restored is None else {
                "id": restored.checkpoint_id, "restore_timestamp": restored.restore_timestamp_ms,
                "is_savepoint": restored.savepoint, "external_path": restored.external_path},
        },
        "history": [checkpoint_statistics(s, include_tasks=False) for s in stats.history],
    }


def checkpoint_config_info(config: CheckpointCoordinatorConfiguration) -> dict[str, Any]:
    """``/jobs/:jobid/checkpoints/config`` (Flink ``CheckpointConfigInfo``)."""
    retained = config.retained_on_cancellation
    return {
        "mode": "exactly_once" if config.exactly_once else "at_least_once",
        "interval": config.interval_ms,
        "timeout": config.timeout_ms,
        "min_pause": config.min_pause_ms,
        "max_concurrent": config.max_concurrent,
        "externalization": {"enabled": retained, "delete_on_cancellation": not retained},
        "state_backend": "hashmap",
        "checkpoint_storage": "FileSystemCheckpointStorage",
        "unaligned_checkpoints": False,
        "tolerable_failed_checkpoints": config.tolerable_failures,
        "aligned_checkpoint_timeout": 0,
        "checkpoints_after_tasks_finish": True,
        "state_changelog_enabled": False,
        "changelog_periodic_materialization_interval": -1,
        "changelog_storage": "memory",
    }


#: what a job that does not checkpoint reports: the defaults with interval Long.MAX_VALUE
_PERIODIC_CHECKPOINTS_OFF = CheckpointCoordinatorConfiguration.from_settings(
    CheckpointSettings(interval_s=None))


def _parse_checkpoint_id(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise RestHandlerException(
            400, f"Bad request, could not parse path parameter checkpointid: {text!r} is not a "
                 f"checkpoint id (a non-negative integer).")
    return int(text)


# ---- routes --------------------------------------------------------------------------------------------


@router.get(_CHECKPOINTS, tags=["jobs"], summary="Checkpointing statistics of a job.",
            description="Counts, a summary of the completed checkpoints, the latest completed, "
                        "savepoint, failed and restored ones, and the recent history.")
async def checkpointing_statistics_handler(jobid: str, ctx: Ctx) -> dict[str, Any]:
    graph = await ctx.dispatcher.request_job(parse_id(JobID, "jobid", jobid))
    return checkpointing_statistics(graph.checkpoint_stats)


@router.get(_CHECKPOINTS + "/config", tags=["jobs"],
            summary="The checkpointing configuration of a job.")
async def checkpoint_config_handler(jobid: str, ctx: Ctx) -> dict[str, Any]:
    job_id = parse_id(JobID, "jobid", jobid)
    graph = await ctx.dispatcher.request_job(job_id)
    stats = graph.checkpoint_stats
    if stats is None or stats.config is None:
        return checkpoint_config_info(_PERIODIC_CHECKPOINTS_OFF)
    return checkpoint_config_info(stats.config)


@router.get(_CHECKPOINTS + "/details/{checkpointid}", tags=["jobs"],
            summary="Details of one checkpoint, with its statistics per vertex.")
async def checkpoint_details_handler(jobid: str, checkpointid: str, ctx: Ctx) -> dict[str, Any]:
    return checkpoint_statistics(await _checkpoint(jobid, checkpointid, ctx), include_tasks=True)


@router.get(_CHECKPOINTS + "/details/{checkpointid}/subtasks/{vertexid}", tags=["jobs"],
            summary="One vertex of a checkpoint, with its subtasks.")
async def task_checkpoint_details_handler(jobid: str, checkpointid: str, vertexid: str,
                                          ctx: Ctx) -> dict[str, Any]:
    vertex_id = str(parse_id(JobVertexID, "vertexid", vertexid))
    found = await _checkpoint(jobid, checkpointid, ctx)
    for task in found.tasks:
        if task.job_vertex_id == vertex_id:
            return subtask_checkpoint_statistics(found, task)
    raise RestHandlerException(
        404, f"There is no checkpoint statistics for task {vertex_id} in checkpoint "
             f"{found.checkpoint_id}.")


async def _checkpoint(jobid: str, checkpointid: str, ctx: RestContext) -> ArchivedCheckpointStats:
    job_id = parse_id(JobID, "jobid", jobid)
    checkpoint_id = _parse_checkpoint_id(checkpointid)
    graph = await ctx.dispatcher.request_job(job_id)
    stats = graph.checkpoint_stats
    if stats is None or not stats.enabled:
        raise RestHandlerException(404, f"Checkpointing was not enabled for job {job_id}.")
    found = stats.checkpoint(checkpoint_id)
    if found is None:
        raise RestHandlerException(
            404, f"Could not find checkpointing statistics for checkpoint {checkpoint_id}.")
    return found
