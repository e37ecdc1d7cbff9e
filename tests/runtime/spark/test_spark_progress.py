"""``SparkTaskProgress``: a batch attempt's live counters (no Spark started; the embedded-server
path runs in tests/e2e/test_live_metrics.py)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from flintlock.runtime.spark import spark_progress
from flintlock.runtime.spark.spark_progress import SparkTaskProgress
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics


class _RemoteSession:
    """What the progress code uses of a Spark Connect session to a remote server."""

    def __init__(self) -> None:
        self.handlers: list[Any] = []

    def registerProgressHandler(self, handler: Any) -> None:
        self.handlers.append(handler)

    def removeProgressHandler(self, handler: Any) -> None:
        self.handlers.remove(handler)

    def report(self, operation_id: str, *bytes_read: int) -> None:
        stages = [SimpleNamespace(num_bytes_read=b) for b in bytes_read]
        for handler in list(self.handlers):  # PySpark passes keywords
            handler(stages=stages, inflight_tasks=1, operation_id=operation_id, done=False)


@pytest.fixture
def remote(monkeypatch: pytest.MonkeyPatch) -> _RemoteSession:
    monkeypatch.setattr(spark_progress, "embedded_spark_context", lambda: None)
    return _RemoteSession()


def test_counts_never_go_down() -> None:
    progress = SparkTaskProgress()
    progress.update(IOMetrics(records_in=10, bytes_in=100, records_out=5, bytes_out=50))
    progress.update(IOMetrics(records_in=7, bytes_in=120, records_out=0, bytes_out=60))
    assert (progress.records_in, progress.bytes_in, progress.records_out, progress.bytes_out) == (
        10, 120, 5, 60)


def test_busy_time_is_the_time_since_start_and_nothing_else_is_counted() -> None:
    now = [100.0]
    progress = SparkTaskProgress(clock=lambda: now[0])
    now[0] = 102.5
    assert progress.busy_ms == 2500.0
    assert (progress.back_pressured_ms, progress.idle_ms, progress.epochs) == (0.0, 0.0, 0)
    assert progress.input_watermark is None and progress.output_watermark is None


def test_a_remote_session_counts_bytes_read_of_the_tasks_own_operations(remote) -> None:
    progress = SparkTaskProgress()
    progress.start(remote, "flintlock-tag", "progress")
    remote.report("op-1", 100, 50)
    remote.report("op-1", 300, 50)  # the same operation, later: replaces its figure
    remote.report("op-2", 25)
    assert progress.bytes_in == 375 and progress.records_in == 0
    # another task's operation (another thread) is not counted
    other = threading.Thread(target=remote.report, args=("op-3", 10_000))
    other.start()
    other.join()
    assert progress.bytes_in == 375
    progress.stop()
    assert remote.handlers == []
    progress.stop()  # idempotent


def test_no_handler_api_means_no_live_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_progress, "embedded_spark_context", lambda: None)
    progress = SparkTaskProgress()
    progress.start(object(), "tag", "progress")  # e.g. a classic session
    progress.stop()
    assert progress.bytes_in == 0


def test_without_an_embedded_server_there_is_nothing_to_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_progress, "embedded_spark_context", lambda: None)
    assert spark_progress.embedded_tagged_io(object(), "tag") is None
