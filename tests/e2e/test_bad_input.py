"""Bad input ends in a clear error naming the cause, and nothing is left running (issue 2, §7)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.client.job_client import JobExecutionException
from flintlock.connectors import FileSink, FileSource
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.runtime.spark.session import embedded_active_job_ids
from flintlock.testing.waiting import wait_until_sync

pytestmark = [pytest.mark.spark]


def _env() -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration({"local.number-taskmanager": 2, "taskmanager.numberOfTaskSlots": 2})
    )
    env.set_parallelism(2)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    return env


def _no_task_threads(deadline_s: float = 10.0) -> list[str]:
    def alive() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith("Task-")]

    wait_until_sync(lambda: not alive(), deadline_s, describe=alive)
    return alive()


def test_a_column_that_does_not_exist_names_the_column_and_operator() -> None:
    env = _env()
    ds = env.from_sequence(1, 10).filter(F.col("no_such_column") > 3).name("keep big ones")
    with pytest.raises(JobExecutionException) as info:
        ds.execute_and_collect()
    message = str(info.value)
    assert "no_such_column" in message
    assert "keep big ones" in message
    assert info.value.status == "FAILED"
    assert _no_task_threads() == []


def test_a_missing_input_path_is_named(tmp_path: Path) -> None:
    env = _env()
    missing = tmp_path / "nowhere" / "lineitem"
    ds = env.from_source(FileSource.parquet(str(missing)), "lineitem")
    with pytest.raises(JobExecutionException) as info:
        ds.execute_and_collect()
    assert str(missing) in str(info.value)


def test_a_function_that_cannot_be_pickled_is_named_before_submission() -> None:
    env = _env()
    lock = threading.Lock()

    def uses_a_lock(row):  # closes over a lock: not picklable
        with lock:
            return (row.id,)

    with pytest.raises(Exception) as info:
        env.from_sequence(1, 3).map(uses_a_lock, "id long").execute_and_collect()
    assert "uses_a_lock" in str(info.value)
    assert "Map" in str(info.value)


def test_a_failed_job_leaves_nothing_at_the_sink_path(tmp_path: Path) -> None:
    env = _env()
    out = tmp_path / "out"

    def fail_on_seven(row):
        if row.id == 7:
            raise ValueError("record 7 is malformed")
        return (row.id,)

    env.from_sequence(1, 20).map(fail_on_seven, "id long").sink_to(FileSink.parquet(str(out)))
    with pytest.raises(JobExecutionException) as info:
        env.execute("fails at record 7")
    assert "record 7 is malformed" in str(info.value)
    assert "ValueError" in str(info.value)
    assert not out.exists() or not any(out.iterdir())


def test_cancelling_a_running_job_through_the_job_client(tmp_path: Path) -> None:
    env = _env()

    def slow(row):
        time.sleep(0.05)
        return (row.id,)

    env.from_sequence(1, 100_000).map(slow, "id long").sink_to(FileSink.parquet(str(tmp_path / "never")))
    client = env.execute_async("slow job")
    def states() -> list[str]:
        return [s.state.name for v in client.get_job_details().vertices for s in v.subtasks]

    wait_until_sync(lambda: "RUNNING" in states(), 60, interval_s=0.05, describe=states)
    started = time.monotonic()
    client.cancel()
    with pytest.raises(JobExecutionException) as info:
        client.get_job_execution_result(timeout_s=60)
    assert info.value.status == "CANCELED"
    assert client.get_job_status() is JobStatus.CANCELED
    assert time.monotonic() - started < 30, "cancellation took too long"
    assert _no_task_threads() == []
    # the cancellation reached Spark: no job of the cancelled tasks still holds the cores
    wait_until_sync(lambda: embedded_active_job_ids() == [], 15, interval_s=0.05,
                    describe=embedded_active_job_ids)
    # the cluster and its Spark session still work after the cancellation
    assert [tuple(r) for r in env.from_sequence(1, 3).sort("id").execute_and_collect()] == [(1,), (2,), (3,)]
    assert not (tmp_path / "never").exists() or not any((tmp_path / "never").iterdir())
