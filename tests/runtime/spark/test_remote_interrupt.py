"""A cancelled attempt on a remote Spark server interrupts its operation once it runs a stage.

Spark Connect interrupts an operation once; an interrupt that lands while the operation is being
planned is lost and its Spark job runs to the end. On a remote server (``spark.remote``) nothing
else cancels that job, so ``SparkStreamTask`` sends ``interruptTag`` only once the attempt's
operation reports a running stage (or without progress reports, or after a grace period).
No Spark here: a fake remote session records the interrupts.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from flintlock.runtime.deployment import TaskDeploymentDescriptor
from flintlock.runtime.ids import (
    AllocationID,
    ExecutionAttemptID,
    ExecutionVertexID,
    JobID,
    JobVertexID,
)
from flintlock.runtime.spark import spark_progress, stream_task
from flintlock.runtime.spark.spark_progress import SparkTaskProgress
from flintlock.runtime.spark.stream_task import SparkStreamTask
from flintlock.runtime.taskmanager.invokable import RuntimeEnvironment
from flintlock.testing.waiting import wait_until_sync


class _RemoteSession:
    def __init__(self) -> None:
        self.handlers: list[Any] = []
        self.interrupts: list[str] = []

    def registerProgressHandler(self, handler: Any) -> None:
        self.handlers.append(handler)

    def removeProgressHandler(self, handler: Any) -> None:
        self.handlers.remove(handler)

    def interruptTag(self, tag: str) -> list[str]:
        self.interrupts.append(tag)
        return []

    def report_running_stage(self) -> None:
        stage = SimpleNamespace(stage_id=0, num_tasks=4, num_completed_tasks=1,
                                num_bytes_read=0, done=False)
        for handler in list(self.handlers):
            handler(stages=[stage], inflight_tasks=3, operation_id="op", done=False)


@pytest.fixture
def remote(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A task whose Spark is a remote session: its canceler's loop turns are counted."""
    turns = [0]

    def no_embedded_server(*_: Any) -> bool:
        turns[0] += 1
        return False

    monkeypatch.setattr(spark_progress, "embedded_spark_context", lambda: None)
    monkeypatch.setattr(stream_task, "cancel_jobs_with_connect_tag", no_embedded_server)
    monkeypatch.setattr(stream_task, "_INTERRUPT_INTERVAL_S", 0.01)
    tdd = TaskDeploymentDescriptor(
        job_id=JobID.generate(), job_name="test", vertex_name="Source: slow",
        attempt_id=ExecutionAttemptID.generate(ExecutionVertexID(JobVertexID.generate(), 0), 0),
        allocation_id=AllocationID.generate(), number_of_subtasks=1, max_parallelism=128,
        invokable_class="flintlock.runtime.spark.stream_task:SparkStreamTask",
        invokable_payload=b"", input_gates=(), produced_partitions=(), source_splits=(),
        job_configuration={})
    session = _RemoteSession()
    task = SparkStreamTask(RuntimeEnvironment(tdd=tdd))
    task._spark = session  # what _tagged_session remembers
    yield {"task": task, "session": session, "turns": turns}
    task._done.set()  # ends the canceler


def test_the_interrupt_waits_for_the_operation_to_run_a_stage(remote: dict[str, Any]) -> None:
    task, session, turns = remote["task"], remote["session"], remote["turns"]
    task.stats = SparkTaskProgress()
    task.stats.start(session, "tag", "progress")  # this thread's operations
    task.cancel()
    wait_until_sync(lambda: turns[0] >= 5, 10, interval_s=0.01, describe=lambda: turns)
    assert session.interrupts == []  # still planning: an interrupt now could be lost
    session.report_running_stage()
    wait_until_sync(lambda: session.interrupts, 10, interval_s=0.01, describe=lambda: turns)
    assert set(session.interrupts) == {task._tag}


def test_without_progress_reports_the_interrupt_goes_at_once(remote: dict[str, Any]) -> None:
    task, session = remote["task"], remote["session"]
    task.stats = SparkTaskProgress()  # never started: no progress followed
    task.cancel()
    wait_until_sync(lambda: session.interrupts, 10, interval_s=0.01,
                    describe=lambda: remote["turns"])


def test_after_the_grace_period_the_interrupt_goes_anyway(
        remote: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    task, session = remote["task"], remote["session"]
    monkeypatch.setattr(stream_task, "_REMOTE_INTERRUPT_GRACE_S", 0.05)
    task.stats = SparkTaskProgress()
    task.stats.start(session, "tag", "progress")
    task.cancel()
    wait_until_sync(lambda: session.interrupts, 10, interval_s=0.01,
                    describe=lambda: remote["turns"])
