"""CheckpointCoordinator, the pure core: trigger rules, acknowledgements, finalization, aborts,
tolerable failures, retention and restore (Flink ``CheckpointCoordinatorTest`` cases)."""

from __future__ import annotations

import pytest

from flintlock.runtime.checkpoint.coordinator import (
    CheckpointCoordinator,
    CheckpointSettings,
    DiscardCheckpoint,
    ExpireCheckpoint,
    FailJobGlobally,
    FinalizeCheckpoint,
    NotifyCheckpoint,
    TaskToCheckpoint,
    TriggerCheckpoint,
)
from flintlock.runtime.checkpoint.snapshots import OperatorStateHandle, TaskStateSnapshot
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID, JobVertexID
from flintlock.runtime.jobgraph.types import ExecutionState

SOURCE, WINDOW = JobVertexID.generate(), JobVertexID.generate()
R, F = ExecutionState.RUNNING, ExecutionState.FINISHED


def _attempt(vertex: JobVertexID, index: int, number: int = 0) -> ExecutionAttemptID:
    return ExecutionAttemptID(ExecutionVertexID(vertex, index), number, "x")


def _tasks(source_state: ExecutionState = R, window_state: ExecutionState = R,
           number: int = 0) -> list[TaskToCheckpoint]:
    return [TaskToCheckpoint(_attempt(SOURCE, i, number), source_state, True, f"te{i}")
            for i in range(2)] + [
        TaskToCheckpoint(_attempt(WINDOW, i, number), window_state, False, f"te{i}")
        for i in range(2)]


def _coordinator(**settings: object) -> CheckpointCoordinator:
    return CheckpointCoordinator("job", CheckpointSettings(interval_s=1.0, directory="/cp",
                                                           **settings))  # type: ignore[arg-type]


def _state(rows: int = 0) -> TaskStateSnapshot:
    return TaskStateSnapshot({"position": rows},
                             (OperatorStateHandle(0, "op", "/cp/x", rows, "a long", size_bytes=rows),))


def _ack_all(c: CheckpointCoordinator, n: int, number: int = 0) -> list[object]:
    out: list[object] = []
    for t in _tasks(number=number):
        out += c.acknowledge(t.attempt_id, n, _state(10), now_ms=2_000)
    return out


def _complete(c: CheckpointCoordinator, n: int, now_s: float = 2.0) -> list[object]:
    (finalize,) = _ack_all(c, n)
    assert isinstance(finalize, FinalizeCheckpoint)
    return c.finalized(finalize.checkpoint, None, now_s, 2_100)  # type: ignore[return-value]


def test_trigger_sends_the_barrier_to_running_sources_only_and_arms_the_timeout() -> None:
    c = _coordinator(timeout_s=30.0)
    n, why, commands = c.trigger(0.0, 1_000, _tasks())
    assert (n, why) == (1, "")
    triggers = [x for x in commands if isinstance(x, TriggerCheckpoint)]
    assert sorted(t.attempt_id.subtask_index for t in triggers) == [0, 1]
    assert all(t.attempt_id.job_vertex_id == SOURCE and t.location == "/cp/job/chk-1"
               for t in triggers)
    assert ExpireCheckpoint(30.0, 1) in commands


@pytest.mark.parametrize("state", [ExecutionState.DEPLOYING, ExecutionState.CANCELING])
def test_no_checkpoint_while_a_task_is_not_running(state: ExecutionState) -> None:
    c = _coordinator()
    n, why, commands = c.trigger(0.0, 1_000, _tasks(window_state=state))
    assert n is None and commands == []
    assert "Not all required tasks are currently running" in why


def test_max_concurrent_and_min_pause_hold_back_the_next_trigger() -> None:
    c = _coordinator(min_pause_s=5.0)
    assert c.trigger(0.0, 1_000, _tasks())[0] == 1
    n, why, _ = c.trigger(1.0, 2_000, _tasks())
    assert n is None and "in progress" in why
    _complete(c, 1, now_s=2.0)
    n, why, _ = c.trigger(3.0, 3_000, _tasks())
    assert n is None and "min pause" in why
    assert c.trigger(7.5, 8_000, _tasks())[0] == 2


def test_the_last_acknowledgement_finalizes_and_completion_notifies_every_running_task() -> None:
    c = _coordinator()
    c.trigger(0.0, 1_000, _tasks())
    tasks = _tasks()
    assert c.acknowledge(tasks[0].attempt_id, 1, _state(1), 1_500) == []
    assert c.acknowledge(tasks[0].attempt_id, 1, _state(1), 1_500) == []  # a duplicate
    for t in tasks[1:3]:
        assert c.acknowledge(t.attempt_id, 1, _state(1), 1_600) == []
    (finalize,) = c.acknowledge(tasks[3].attempt_id, 1, _state(1), 1_700)
    assert isinstance(finalize, FinalizeCheckpoint)
    cp = finalize.checkpoint
    assert cp.checkpoint_id == 1 and len(cp.tasks) == 4 and cp.state_size == 4
    assert cp.task_state(WINDOW, 1) == _state(1)
    assert c.latest() is None  # not complete before its _metadata is written
    out = c.finalized(cp, None, 2.0, 2_000)
    notified = [x for x in out if isinstance(x, NotifyCheckpoint)]
    assert len(notified) == 4 and all(x.complete for x in notified)
    assert c.latest() == cp and c.counts["completed"] == 1
    assert c.stats(1) is not None and c.stats(1).status == "COMPLETED"  # type: ignore[union-attr]


def test_finished_tasks_count_as_acknowledged_with_their_unpublished_files() -> None:
    c = _coordinator()
    finished = TaskStateSnapshot(finished=True, sink_transactions={0: ("/tmp/attempt",)})
    sink = _attempt(WINDOW, 1)
    c.task_finished(sink, 500, finished)
    tasks = [t if t.attempt_id != sink else TaskToCheckpoint(sink, F, False, "te1")
             for t in _tasks()]
    n, _, _ = c.trigger(0.0, 1_000, tasks)
    out: list[object] = []
    for t in tasks[:3]:
        out += c.acknowledge(t.attempt_id, 1, _state(), 1_100)
    (finalize,) = out
    assert finalize.checkpoint.task_state(WINDOW, 1) == finished  # type: ignore[attr-defined]
    # a restart of that subtask forgets them: they are not its output any more
    c.finalized(finalize.checkpoint, None, 1.0, 1_200)  # type: ignore[attr-defined]
    c.restore_latest(2_000, [sink.execution_vertex_id])
    assert c.finished_states == {}


def test_a_task_that_finishes_instead_of_acknowledging_completes_the_checkpoint() -> None:
    c = _coordinator()
    c.trigger(0.0, 1_000, _tasks())
    tasks = _tasks()
    for t in tasks[:3]:
        c.acknowledge(t.attempt_id, 1, _state(), 1_100)
    (finalize,) = c.task_finished(tasks[3].attempt_id, 1_200)
    assert finalize.checkpoint.task_state(WINDOW, 1).finished  # type: ignore[attr-defined,union-attr]


def test_decline_aborts_discards_and_fails_the_job_beyond_the_tolerable_number() -> None:
    c = _coordinator(tolerable_failures=1)
    for n in (1, 2):
        assert c.trigger(float(n), n * 1000, _tasks())[0] == n
        out = c.decline(_tasks()[2].attempt_id, n, "disk full", float(n), n * 1000)
        assert DiscardCheckpoint(f"/cp/job/chk-{n}") in out
        assert [x for x in out if isinstance(x, NotifyCheckpoint) and not x.complete]
        failed = [x for x in out if isinstance(x, FailJobGlobally)]
        assert bool(failed) == (n == 2), out
    assert "tolerable" in failed[0].reason and "disk full" in failed[0].reason
    assert c.counts["failed"] == 2 and c.stats(2).status == "FAILED"  # type: ignore[union-attr]


def test_a_completed_checkpoint_resets_the_failure_count() -> None:
    c = _coordinator(tolerable_failures=1)
    c.trigger(0.0, 1_000, _tasks())
    assert not any(isinstance(x, FailJobGlobally) for x in c.expire(1, 1.0, 2_000))
    c.trigger(2.0, 3_000, _tasks())
    _complete(c, 2, now_s=3.0)
    c.trigger(4.0, 5_000, _tasks())
    assert not any(isinstance(x, FailJobGlobally) for x in c.expire(3, 5.0, 6_000))


def test_expiry_and_late_acknowledgements() -> None:
    c = _coordinator(timeout_s=10.0)
    c.trigger(0.0, 1_000, _tasks())
    out = c.expire(1, 10.0, 11_000)
    assert DiscardCheckpoint("/cp/job/chk-1") in out
    assert "expired" in c.stats(1).failure_message  # type: ignore[union-attr]
    assert _ack_all(c, 1) == []  # late: ignored
    assert c.expire(1, 11.0, 12_000) == []


def test_a_failover_aborts_without_counting_and_restores_the_newest_checkpoint() -> None:
    c = _coordinator(tolerable_failures=0)
    c.trigger(0.0, 1_000, _tasks())
    _complete(c, 1)
    c.trigger(3.0, 4_000, _tasks())
    out = c.abort_all("the job is restarting", 4.0, 5_000)
    assert DiscardCheckpoint("/cp/job/chk-2") in out
    assert not any(isinstance(x, FailJobGlobally) for x in out)
    latest = c.restore_latest(6_000)
    assert latest is not None and latest.checkpoint_id == 1
    assert c.counts["restored"] == 1 and c.latest_restored[0] == 1  # type: ignore[index]


def test_num_retained_discards_the_oldest_completed_checkpoints() -> None:
    c = _coordinator(num_retained=2)
    discarded = []
    for n in (1, 2, 3):
        c.trigger(float(n * 10), n * 10_000, _tasks())
        discarded += [x for x in _complete(c, n, now_s=n * 10 + 1.0)
                      if isinstance(x, DiscardCheckpoint)]
    assert discarded == [DiscardCheckpoint("/cp/job/chk-1")]
    assert [cp.checkpoint_id for cp in c.completed] == [2, 3]


def test_a_failed_finalization_aborts_the_checkpoint() -> None:
    c = _coordinator(tolerable_failures=5)
    c.trigger(0.0, 1_000, _tasks())
    (finalize,) = _ack_all(c, 1)
    out = c.finalized(finalize.checkpoint, "OSError: read-only", 1.0, 2_000)  # type: ignore[attr-defined]
    assert DiscardCheckpoint("/cp/job/chk-1") in out
    assert c.latest() is None and "read-only" in c.stats(1).failure_message  # type: ignore[union-attr]


def test_a_savepoint_bypasses_the_limits_and_is_never_discarded() -> None:
    c = _coordinator(num_retained=1)
    c.trigger(0.0, 1_000, _tasks())  # a periodic checkpoint in progress
    n, why, commands = c.trigger(0.1, 1_100, _tasks(), savepoint_location="/sp/savepoint-1")
    assert (n, why) == (2, "")
    assert all(t.location == "/sp/savepoint-1" for t in commands if isinstance(t, TriggerCheckpoint))
    out: list[object] = []
    for t in _tasks():
        out += c.acknowledge(t.attempt_id, 2, _state(), 1_200)
    (finalize,) = out
    assert finalize.checkpoint.savepoint  # type: ignore[attr-defined]
    c.finalized(finalize.checkpoint, None, 0.3, 1_300)  # type: ignore[attr-defined]
    assert c.counts["completed"] == 1 and c.latest_savepoint is not None
    assert c.latest() is None and 1 in c.pending  # not a restore point; nothing subsumed
    # restored from at submission, then subsumed by newer checkpoints: still not deleted
    c.add_restored(finalize.checkpoint, 1_400)  # type: ignore[attr-defined]
    discarded = _complete(c, 1, now_s=1.0)
    c.trigger(2.0, 3_000, _tasks())
    discarded += _complete(c, 3, now_s=3.0)
    assert [x for x in discarded if isinstance(x, DiscardCheckpoint)] == [
        DiscardCheckpoint("/cp/job/chk-1")]
    assert [cp.checkpoint_id for cp in c.completed] == [3]
