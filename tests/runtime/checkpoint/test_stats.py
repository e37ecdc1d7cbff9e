"""Checkpoint statistics: ``snapshot_stats`` of a driven ``CheckpointCoordinator``, the summaries
and metrics, and the REST bodies built from them (Flink ``CheckpointStatsSnapshot``,
``CheckpointingStatistics``, ``CheckpointConfigInfo``)."""

from __future__ import annotations

import pytest

from flintlock.runtime.checkpoint.coordinator import (
    CheckpointCoordinator,
    CheckpointSettings,
    FinalizeCheckpoint,
    TaskToCheckpoint,
)
from flintlock.runtime.checkpoint.snapshots import OperatorStateHandle, TaskStateSnapshot
from flintlock.runtime.checkpoint.stats import (
    CheckpointStatsSnapshot,
    StatsSummary,
    checkpoint_metric_values,
    snapshot_stats,
    summarize,
)
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID, JobVertexID
from flintlock.runtime.jobgraph.types import ExecutionState
from flintlock.runtime.rest.handlers.checkpoints import (
    checkpoint_config_info,
    checkpoint_statistics,
    checkpointing_statistics,
)
from flintlock.runtime.rpc import codec

SOURCE = JobVertexID("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
WINDOW = JobVertexID("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")


def _attempt(vertex: JobVertexID, index: int) -> ExecutionAttemptID:
    return ExecutionAttemptID(ExecutionVertexID(vertex, index), 0, "x")


def _tasks() -> list[TaskToCheckpoint]:
    return [TaskToCheckpoint(_attempt(v, i), ExecutionState.RUNNING, v == SOURCE, f"te{i}")
            for v in (SOURCE, WINDOW) for i in range(2)]


def _coordinator(**settings: object) -> CheckpointCoordinator:
    return CheckpointCoordinator("job", CheckpointSettings(  # type: ignore[arg-type]
        **{"interval_s": 1.0, "directory": "/cp", **settings}))


def _state(size: int) -> TaskStateSnapshot:
    return TaskStateSnapshot({"position": 1}, (OperatorStateHandle(0, "op", size_bytes=size),))


def _complete(c: CheckpointCoordinator, trigger_ms: int, ack_ms: int, done_ms: int,
              sizes: tuple[int, int, int, int] = (1, 2, 30, 40)) -> int:
    n, why, _ = c.trigger(trigger_ms / 1000, trigger_ms, _tasks())
    assert n is not None, why
    out: list[object] = []
    for task, size in zip(_tasks(), sizes, strict=True):
        out += c.acknowledge(task.attempt_id, n, _state(size), ack_ms)
    (finalize,) = out
    assert isinstance(finalize, FinalizeCheckpoint)
    c.finalized(finalize.checkpoint, None, done_ms / 1000, done_ms)
    return n


def _fail(c: CheckpointCoordinator, trigger_ms: int, fail_ms: int) -> int:
    n, why, _ = c.trigger(trigger_ms / 1000, trigger_ms, _tasks())
    assert n is not None, why
    c.decline(_tasks()[2].attempt_id, n, "disk full", fail_ms / 1000, fail_ms)
    return n


# ---- snapshot_stats ----------------------------------------------------------------------------------


def test_a_fresh_coordinator_snapshots_no_checkpoints_and_its_configuration_in_ms() -> None:
    c = _coordinator(interval_s=2.5, timeout_s=30.0, min_pause_s=0.5, max_concurrent=2,
                     mode="AT_LEAST_ONCE", retention="RETAIN_ON_CANCELLATION",
                     tolerable_failures=3, num_retained=2)
    stats = snapshot_stats(c)
    assert stats.enabled
    config = stats.config
    assert config is not None
    assert (config.interval_ms, config.timeout_ms, config.min_pause_ms) == (2500, 30_000, 500)
    assert (config.max_concurrent, config.tolerable_failures, config.num_retained) == (2, 3, 2)
    assert not config.exactly_once and config.retained_on_cancellation
    assert config.directory == "/cp"
    assert stats.history == () and stats.counts.total == 0
    assert stats.latest_completed is stats.latest_failed is stats.latest_restored is None


def test_completed_failed_and_pending_checkpoints_newest_first() -> None:
    c = _coordinator(num_retained=2)
    _complete(c, trigger_ms=1_000, ack_ms=1_400, done_ms=1_500)
    _fail(c, trigger_ms=3_000, fail_ms=3_250)
    n, _, _ = c.trigger(5.0, 5_000, _tasks())
    c.acknowledge(_tasks()[3].attempt_id, 3, _state(7), 5_100)

    stats = snapshot_stats(c)
    assert [s.checkpoint_id for s in stats.history] == [3, 2, 1]
    pending, failed, completed = stats.history
    counts = stats.counts
    assert (counts.completed, counts.failed, counts.in_progress, counts.total) == (1, 1, 1, 3)

    assert completed.status == "COMPLETED" and not completed.discarded
    assert (completed.trigger_timestamp_ms, completed.latest_ack_timestamp_ms) == (1_000, 1_500)
    assert completed.end_to_end_duration_ms == 500
    assert completed.state_size == completed.checkpointed_size == 73
    assert completed.external_path == "/cp/job/chk-1"
    assert (completed.num_subtasks, completed.num_acknowledged) == (4, 4)
    assert [(t.job_vertex_id, t.num_subtasks, t.num_acknowledged, t.state_size)
            for t in completed.tasks] == [(str(SOURCE), 2, 2, 3), (str(WINDOW), 2, 2, 70)]
    assert stats.latest_completed == completed

    assert failed.status == "FAILED" and failed.failure_timestamp_ms == 3_250
    assert "disk full" in failed.failure_message
    assert failed.end_to_end_duration_ms == 250 and failed.latest_ack_timestamp_ms == -1
    assert stats.latest_failed == failed

    assert pending.status == "IN_PROGRESS" and pending.num_acknowledged == 1
    assert pending.latest_ack_timestamp_ms == 5_100 and pending.end_to_end_duration_ms == 100
    assert pending.failure_timestamp_ms == -1 and pending.failure_message == ""
    assert pending.task(str(WINDOW)).state_size == 7  # type: ignore[union-attr]
    assert pending.task(str(SOURCE)).num_acknowledged == 0  # type: ignore[union-attr]


def test_a_pending_checkpoint_nobody_acknowledged_has_no_ack_time_nor_duration() -> None:
    c = _coordinator()
    c.trigger(1.0, 1_000, _tasks())
    (pending,) = snapshot_stats(c).history
    assert (pending.latest_ack_timestamp_ms, pending.end_to_end_duration_ms) == (-1, -1)


def test_the_snapshot_does_not_change_with_the_coordinator() -> None:
    c = _coordinator()
    c.trigger(1.0, 1_000, _tasks())
    before = snapshot_stats(c)
    for task in _tasks():
        c.acknowledge(task.attempt_id, 1, _state(5), 1_200)
    (pending,) = before.history
    assert pending.status == "IN_PROGRESS" and pending.num_acknowledged == 0
    assert pending.state_size == 0 and before.counts.in_progress == 1


def test_subsumed_checkpoints_are_discarded_and_keep_their_sizes() -> None:
    c = _coordinator(num_retained=1)
    _complete(c, 1_000, 1_100, 1_200)
    _complete(c, 2_000, 2_100, 2_200)
    newest, oldest = snapshot_stats(c).history
    assert (newest.checkpoint_id, newest.discarded) == (2, False)
    assert (oldest.checkpoint_id, oldest.discarded) == (1, True)
    assert oldest.state_size == 73  # recorded as acknowledgements arrive
    assert [t.state_size for t in oldest.tasks] == [3, 70]
    assert [t.state_size for t in newest.tasks] == [3, 70]


def test_the_latest_completed_checkpoint_outlives_the_history() -> None:
    c = _coordinator(tolerable_failures=100)
    _complete(c, 1_000, 1_100, 1_200)
    for i in range(12):
        _fail(c, 10_000 + 1_000 * i, 10_500 + 1_000 * i)
    stats = snapshot_stats(c)
    assert len(stats.history) == 10 and all(s.status == "FAILED" for s in stats.history)
    assert stats.latest_completed is not None and stats.latest_completed.checkpoint_id == 1
    assert stats.checkpoint(1) == stats.latest_completed
    assert stats.checkpoint(2) is None  # failed and dropped from the history
    assert stats.completed_in_history() == []
    assert stats.state_size_summary() == StatsSummary()


def test_a_restore_is_reported_with_its_checkpoint() -> None:
    c = _coordinator()
    _complete(c, 1_000, 1_100, 1_200)
    c.restore_latest(9_000)
    restored = snapshot_stats(c).latest_restored
    assert restored is not None
    assert (restored.checkpoint_id, restored.restore_timestamp_ms) == (1, 9_000)
    assert restored.external_path == "/cp/job/chk-1" and not restored.savepoint
    assert snapshot_stats(c).counts.restored == 1


def test_the_snapshot_crosses_the_rpc_codec() -> None:
    c = _coordinator()
    _complete(c, 1_000, 1_100, 1_200)
    _fail(c, 2_000, 2_500)
    c.trigger(3.0, 3_000, _tasks())
    c.restore_latest(4_000)
    stats = snapshot_stats(c)
    assert codec.loads(codec.dumps(stats)) == stats


# ---- summaries and metrics ------------------------------------------------------------------------


def test_summarize_uses_flinks_percentile_estimation() -> None:
    s = summarize([40, 10, 30, 20])
    assert (s.count, s.min, s.max, s.avg) == (4, 10, 40, 25)
    assert s.p50 == 25.0  # position 0.5 * 5 = 2.5: between the 2nd and 3rd value
    assert s.p90 == s.p95 == s.p99 == s.p999 == 40.0  # positions beyond n: the maximum
    assert summarize([1, 2]).avg == 1  # integer average, as Flink's long division
    assert summarize([7]) == StatsSummary(1, 7, 7, 7, 7.0, 7.0, 7.0, 7.0, 7.0)
    assert summarize([]) == StatsSummary()


def test_summary_covers_the_completed_checkpoints_of_the_history() -> None:
    c = _coordinator(tolerable_failures=5)
    _complete(c, 1_000, 1_100, 1_300, sizes=(1, 1, 1, 1))
    _fail(c, 2_000, 9_000)
    _complete(c, 10_000, 10_100, 10_500, sizes=(5, 5, 5, 5))
    stats = snapshot_stats(c)
    durations = stats.end_to_end_duration_summary()
    assert (durations.count, durations.min, durations.max, durations.avg) == (2, 300, 500, 400)
    sizes = stats.state_size_summary()
    assert (sizes.min, sizes.max) == (4, 20) and stats.checkpointed_size_summary() == sizes


def test_checkpoint_metrics() -> None:
    assert checkpoint_metric_values(None) == {}
    empty = checkpoint_metric_values(snapshot_stats(_coordinator()))
    assert empty["lastCheckpointDuration"] == empty["lastCheckpointSize"] == -1
    assert empty["lastCheckpointRestoreTimestamp"] == -1
    assert empty["totalNumberOfCheckpoints"] == 0

    c = _coordinator(tolerable_failures=5)
    _complete(c, 1_000, 1_100, 1_250)
    _fail(c, 2_000, 2_500)
    c.trigger(3.0, 3_000, _tasks())
    c.restore_latest(4_000)
    assert checkpoint_metric_values(snapshot_stats(c)) == {
        "lastCheckpointDuration": 250.0, "lastCheckpointSize": 73.0,
        "lastCheckpointRestoreTimestamp": 4_000.0, "numberOfInProgressCheckpoints": 1.0,
        "numberOfCompletedCheckpoints": 1.0, "numberOfFailedCheckpoints": 1.0,
        "totalNumberOfCheckpoints": 3.0,
    }


# ---- REST bodies ----------------------------------------------------------------------------------------

_COMMON = {"className", "id", "status", "is_savepoint", "savepointFormat", "trigger_timestamp",
           "latest_ack_timestamp", "checkpointed_size", "state_size", "end_to_end_duration",
           "alignment_buffered", "processed_data", "persisted_data", "num_subtasks",
           "num_acknowledged_subtasks", "checkpoint_type", "tasks"}
_SUMMARY_KEYS = ["min", "max", "avg", "p50", "p90", "p95", "p99", "p999"]


def test_statistics_of_a_job_without_checkpointing_are_empty() -> None:
    zeros = dict.fromkeys(_SUMMARY_KEYS, 0)
    body = checkpointing_statistics(None)
    assert body == {
        "counts": {"restored": 0, "total": 0, "in_progress": 0, "completed": 0, "failed": 0},
        "summary": {k: zeros for k in ("checkpointed_size", "state_size", "end_to_end_duration",
                                       "alignment_buffered", "processed_data", "persisted_data")},
        "latest": {"completed": None, "savepoint": None, "failed": None, "restored": None},
        "history": [],
    }
    assert checkpointing_statistics(CheckpointStatsSnapshot()) == body


def test_history_entries_have_flinks_fields_per_kind() -> None:
    c = _coordinator(tolerable_failures=5)
    _complete(c, 1_000, 1_100, 1_200)
    _fail(c, 2_000, 2_500)
    c.trigger(3.0, 3_000, _tasks())
    c.restore_latest(4_000)
    body = checkpointing_statistics(snapshot_stats(c))
    pending, failed, completed = body["history"]
    assert set(pending) == _COMMON and pending["className"] == "in_progress"
    assert set(failed) == _COMMON | {"failure_timestamp", "failure_message"}
    assert set(completed) == _COMMON | {"external_path", "discarded"}
    assert (failed["className"], completed["className"]) == ("failed", "completed")
    assert completed["tasks"] == {} and pending["tasks"] == {}  # only the details list them
    assert completed["savepointFormat"] is None and completed["checkpoint_type"] == "CHECKPOINT"
    assert (completed["end_to_end_duration"], completed["state_size"]) == (200, 73)
    assert completed["external_path"] == "/cp/job/chk-1" and completed["discarded"] is False
    assert (failed["failure_timestamp"], failed["end_to_end_duration"]) == (2_500, 500)
    assert body["counts"] == {"restored": 1, "total": 3, "in_progress": 1, "completed": 1,
                              "failed": 1}
    assert body["latest"]["completed"] == completed and body["latest"]["failed"] == failed
    assert body["latest"]["savepoint"] is None
    assert body["latest"]["restored"] == {"id": 1, "restore_timestamp": 4_000,
                                          "is_savepoint": False,
                                          "external_path": "/cp/job/chk-1"}
    assert body["summary"]["end_to_end_duration"]["max"] == 200
    assert list(body["summary"]["state_size"]) == _SUMMARY_KEYS


def test_details_list_the_vertices() -> None:
    c = _coordinator()
    _complete(c, 1_000, 1_100, 1_200)
    (completed,) = snapshot_stats(c).history
    tasks = checkpoint_statistics(completed, include_tasks=True)["tasks"]
    assert list(tasks) == [str(SOURCE), str(WINDOW)]
    assert tasks[str(WINDOW)] == {
        "id": 1, "status": "COMPLETED", "latest_ack_timestamp": 1_100, "checkpointed_size": 70,
        "state_size": 70, "end_to_end_duration": 100, "alignment_buffered": 0,
        "processed_data": 0, "persisted_data": 0, "num_subtasks": 2,
        "num_acknowledged_subtasks": 2,
    }


@pytest.mark.parametrize(("retention", "enabled"), [
    ("NO_EXTERNALIZED_CHECKPOINTS", False),
    ("DELETE_ON_CANCELLATION", False),  # the JobMaster deletes them whenever the job ends
    ("RETAIN_ON_CANCELLATION", True),
])
def test_config_info(retention: str, enabled: bool) -> None:
    c = _coordinator(interval_s=10.0, timeout_s=60.0, min_pause_s=1.5, max_concurrent=1,
                     tolerable_failures=2, retention=retention)
    config = snapshot_stats(c).config
    assert config is not None
    assert checkpoint_config_info(config) == {
        "mode": "exactly_once", "interval": 10_000, "timeout": 60_000, "min_pause": 1_500,
        "max_concurrent": 1,
        "externalization": {"enabled": enabled, "delete_on_cancellation": not enabled},
        "state_backend": "hashmap", "checkpoint_storage": "FileSystemCheckpointStorage",
        "unaligned_checkpoints": False, "tolerable_failed_checkpoints": 2,
        "aligned_checkpoint_timeout": 0, "checkpoints_after_tasks_finish": True,
        "state_changelog_enabled": False, "changelog_periodic_materialization_interval": -1,
        "changelog_storage": "memory",
    }
    at_least_once = _coordinator(mode="AT_LEAST_ONCE")
    assert checkpoint_config_info(snapshot_stats(at_least_once).config)["mode"] == \
        "at_least_once"  # type: ignore[arg-type]
