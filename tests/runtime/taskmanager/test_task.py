from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from flintlock.runtime.deployment import ResultPartitionDeploymentDescriptor
from flintlock.runtime.ids import IntermediateDataSetID, IntermediateResultPartitionID
from flintlock.runtime.jobgraph.types import ExecutionState, ResultPartitionType, ShipStrategy
from flintlock.runtime.taskmanager.invokable import RuntimeEnvironment
from flintlock.runtime.taskmanager.task import Task
from flintlock.runtime.taskmanager.task_execution_state import (
    IOMetrics,
    TaskExecutionState,
    TaskResult,
)
from flintlock.testing.invokables import (
    FAILURE_MESSAGE_KEY,
    LATCH_KEY,
    SLEEP_MS_KEY,
    BlockingInvokable,
    FailingInvokable,
    NoOpInvokable,
    SleepingInvokable,
    blocking_latch_scope,
    make_tdd,
)
from flintlock.testing.waiting import wait_until_sync

E = ExecutionState


class _Recorder:
    def __init__(self) -> None:
        self.reports: list[TaskExecutionState] = []
        self.threads: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, state: TaskExecutionState) -> None:
        with self._lock:
            self.reports.append(state)
            self.threads.append(threading.current_thread().name)

    @property
    def states(self) -> list[ExecutionState]:
        return [r.state for r in self.reports]


@pytest.fixture(autouse=True)
def no_leaked_task_threads() -> Iterator[None]:
    yield
    wait_until_sync(lambda: not [t for t in threading.enumerate() if t.name.startswith("Task-")],
                    timeout_s=5, describe=lambda: [t.name for t in threading.enumerate()])


def _partition(n: int) -> ResultPartitionDeploymentDescriptor:
    return ResultPartitionDeploymentDescriptor(
        IntermediateResultPartitionID(IntermediateDataSetID.generate(), 0),
        ShipStrategy.HASH, ResultPartitionType.BLOCKING, n)


def test_noop_task_finishes_in_its_named_thread_with_empty_partitions() -> None:
    rec = _Recorder()
    tdd = make_tdd(NoOpInvokable, vertex_name="Map", subtask_index=1, number_of_subtasks=3,
                   attempt_number=2, produced_partitions=(_partition(4),))
    task = Task(tdd, {}, rec, task_manager="tm-1")
    assert task.thread.name == "Task-Map-2/3#2"
    task.start()
    assert task.join(5)
    assert rec.states == [E.DEPLOYING, E.INITIALIZING, E.RUNNING, E.FINISHED]
    assert set(rec.threads) == {"Task-Map-2/3#2"}
    final = rec.reports[-1]
    assert final.task_manager == "tm-1" and final.attempt_id == tdd.attempt_id
    assert final.error is None and final.result is not None
    [location] = final.result.partitions
    assert location.uri == "" and location.rows_per_subpartition == (0, 0, 0, 0)
    assert location.partition_id == tdd.produced_partitions[0].partition_id


def test_failing_task_reports_failed_with_the_error() -> None:
    rec = _Recorder()
    task = Task(make_tdd(FailingInvokable, job_configuration={FAILURE_MESSAGE_KEY: "bad row 7"}),
                {}, rec)
    task.start()
    assert task.join(5)
    assert rec.states == [E.DEPLOYING, E.INITIALIZING, E.RUNNING, E.FAILED]
    error = rec.reports[-1].error
    assert error is not None and error.class_name == "RuntimeError"
    assert error.message == "bad row 7" and "invokables.py" in error.traceback


def test_unloadable_invokable_fails_while_deploying() -> None:
    rec = _Recorder()
    task = Task(make_tdd("flintlock.testing.invokables:NoSuchInvokable"), {}, rec)
    task.start()
    assert task.join(5)
    assert rec.states == [E.DEPLOYING, E.FAILED]
    assert "NoSuchInvokable" in rec.reports[-1].error.message  # type: ignore[union-attr]


def test_cancel_of_a_blocking_task_ends_canceled() -> None:
    rec = _Recorder()
    with blocking_latch_scope("test_cancel") as latch:
        task = Task(make_tdd(BlockingInvokable, job_configuration={LATCH_KEY: "test_cancel"}),
                    {}, rec)
        task.start()
        assert latch.started.acquire(timeout=5)
        assert task.state is E.RUNNING
        task.cancel()
        task.cancel()  # idempotent
        assert task.join(5)
    assert rec.states == [E.DEPLOYING, E.INITIALIZING, E.RUNNING, E.CANCELING, E.CANCELED]
    assert rec.reports[-1].error is None


class _Counters:
    records_in, records_out, bytes_in, bytes_out = 2000, 1500, 64_000, 48_000


class CountingBlockingInvokable(BlockingInvokable):
    """Blocks like BlockingInvokable with live counters, as a streaming or batch Spark task has."""

    def __init__(self, env: RuntimeEnvironment) -> None:
        super().__init__(env)
        self.stats = _Counters()


def test_a_cancelled_task_reports_what_it_processed_with_canceled() -> None:
    rec = _Recorder()
    task = Task(make_tdd(f"{__name__}:CountingBlockingInvokable"), {}, rec)
    task.start()
    wait_until_sync(lambda: task.state is E.RUNNING, timeout_s=5, describe=lambda: task.state)
    assert task.live_stats is not None
    task.cancel()
    assert task.join(5)
    assert rec.states[-1] is E.CANCELED
    assert rec.reports[-1].metrics == IOMetrics(2000, 1500, 64_000, 48_000)
    assert all(r.metrics is None for r in rec.reports[:-1])  # only the final report carries them


def test_finished_and_never_started_tasks_report_no_final_counters() -> None:
    rec = _Recorder()
    task = Task(make_tdd(NoOpInvokable), {}, rec)
    task.start()
    assert task.join(5)
    assert rec.states[-1] is E.FINISHED and rec.reports[-1].metrics is None  # in result instead
    rec = _Recorder()
    task = Task(make_tdd(f"{__name__}:CountingBlockingInvokable"), {}, rec)
    task.cancel()
    assert rec.states == [E.CANCELED] and rec.reports[0].metrics is None


def test_released_blocking_task_finishes() -> None:
    rec = _Recorder()
    with blocking_latch_scope("test_release") as latch:
        tasks = [Task(make_tdd(BlockingInvokable, job_configuration={LATCH_KEY: "test_release"}),
                      {}, rec) for _ in range(2)]
        for t in tasks:
            t.start()
        for _ in tasks:
            assert latch.started.acquire(timeout=5)
        latch.release.set()
        assert all(t.join(5) for t in tasks)
    assert [t.state for t in tasks] == [E.FINISHED, E.FINISHED]


def test_cancel_before_start_reports_canceled_once() -> None:
    rec = _Recorder()
    task = Task(make_tdd(NoOpInvokable), {}, rec)
    task.cancel()
    assert rec.states == [E.CANCELED]
    task.start()  # the thread finds it cancelled and reports nothing more
    assert task.join(5)
    assert rec.states == [E.CANCELED]


def test_fail_externally_ends_failed_with_the_cause() -> None:
    rec = _Recorder()
    task = Task(make_tdd(BlockingInvokable), {}, rec)
    task.start()
    wait_until_sync(lambda: task.state is E.RUNNING, timeout_s=5)
    task.fail_externally("slot freed")
    assert task.join(5)
    assert rec.states == [E.DEPLOYING, E.INITIALIZING, E.RUNNING, E.FAILED]
    assert rec.reports[-1].error.message == "slot freed"  # type: ignore[union-attr]


class _FinishDespiteCancel:
    """Returns normally after being cancelled: the task must still end CANCELED."""

    def __init__(self, env: RuntimeEnvironment) -> None:
        self.env = env

    def invoke(self) -> TaskResult:
        self.env.cancelled.wait(5)
        return TaskResult()

    def cancel(self) -> None:
        pass


def test_invoke_returning_after_cancel_is_canceled_not_finished() -> None:
    rec = _Recorder()
    task = Task(make_tdd(f"{__name__}:_FinishDespiteCancel"), {}, rec)
    task.start()
    wait_until_sync(lambda: task.state is E.RUNNING, timeout_s=5)
    task.cancel()
    assert task.join(5)
    assert rec.states[-2:] == [E.CANCELING, E.CANCELED]


def test_illegal_transition_is_refused() -> None:
    task = Task(make_tdd(NoOpInvokable), {}, _Recorder())
    from flintlock.runtime.jobgraph.types import IllegalStateTransition

    with pytest.raises(IllegalStateTransition):
        task.transition_state(E.CREATED, E.FINISHED)
    assert not task.transition_state(E.RUNNING, E.FINISHED)  # not RUNNING: CAS fails


def test_an_injected_slowdown_holds_the_finished_work_back_until_cancelled() -> None:
    """A TaskManager made slow on purpose (``$internal.fault.task-slowdown``): a task whose work
    took 20 ms waits 999 x that before it reports FINISHED; a cancel ends the wait."""
    rec = _Recorder()
    task = Task(make_tdd(SleepingInvokable, job_configuration={SLEEP_MS_KEY: "20"}),
                {"task_slowdown": 1000.0}, rec)
    task.start()
    wait_until_sync(lambda: task.state is E.RUNNING, timeout_s=5, describe=lambda: rec.states)
    assert not task.join(0.3)  # its work is done by now; the fault holds it RUNNING
    assert task.state is E.RUNNING
    task.cancel()
    assert task.join(5)
    assert rec.states == [E.DEPLOYING, E.INITIALIZING, E.RUNNING, E.CANCELING, E.CANCELED]
    quick = _Recorder()
    unslowed = Task(make_tdd(SleepingInvokable, job_configuration={SLEEP_MS_KEY: "1"}),
                    {"task_slowdown": 1.0}, quick)
    unslowed.start()
    assert unslowed.join(5) and quick.states[-1] is E.FINISHED
