"""``execute_and_collect()`` on a STREAMING job: rows arrive while the job runs (Flink's
``CollectResultIterator``), closing the iterator cancels the job, and a bounded job's iterator
ends with every row once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.api import RestartStrategies
from flintlock.connectors import DataGeneratorSource, RateLimiterStrategy
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.testing.waiting import wait_until_sync

pytestmark = [pytest.mark.spark]

SCHEMA = "id long, word string"


def _env(tmp_path: Path, parallelism: int = 2) -> StreamExecutionEnvironment:
    conf = Configuration({"local.number-taskmanager": 1, "taskmanager.numberOfTaskSlots": 4,
                          "shuffle.storage-dir": str(tmp_path / "shuffle")})
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism).set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_restart_strategy(RestartStrategies.no_restart())
    return env


def _record(i: int) -> tuple[int, str]:
    return (i, f"w{i % 3}")


def _status(client: Any) -> JobStatus:
    status = client.get_job_status()
    return status.result() if hasattr(status, "result") else status


def test_rows_arrive_while_an_unbounded_job_runs_and_closing_cancels_it(tmp_path: Path) -> None:
    env = _env(tmp_path)
    source = DataGeneratorSource(_record, None, RateLimiterStrategy.per_second(400), SCHEMA)
    rows = env.from_source(source).rebalance().filter("id % 2 = 0").execute_and_collect()
    with rows:
        got = [next(rows) for _ in range(40)]
        assert _status(rows.job_client) is JobStatus.RUNNING  # the rows came before any end
    assert {r.id % 2 for r in got} == {0} and len({r.id for r in got}) == 40
    wait_until_sync(lambda: _status(rows.job_client) is JobStatus.CANCELED, 30, 0.05,
                    lambda: _status(rows.job_client))
    with pytest.raises(StopIteration):
        next(rows)


def test_a_limit_stops_an_unbounded_job_after_that_many_rows(tmp_path: Path) -> None:
    env = _env(tmp_path, parallelism=1)
    source = DataGeneratorSource(_record, None, RateLimiterStrategy.per_second(300), SCHEMA)
    rows = env.from_source(source).execute_and_collect(limit=25)
    assert len(list(rows)) == 25
    wait_until_sync(lambda: _status(rows.job_client) is JobStatus.CANCELED, 30, 0.05,
                    lambda: _status(rows.job_client))


def test_a_bounded_streaming_job_yields_every_row_once_and_releases_its_results(
        tmp_path: Path) -> None:
    env = _env(tmp_path)
    source = DataGeneratorSource(_record, 2000, RateLimiterStrategy.per_second(1000), SCHEMA)
    rows = env.from_source(source).rebalance().execute_and_collect()
    ids = sorted(r.id for r in rows)
    assert ids == list(range(2000))
    assert _status(rows.job_client) is JobStatus.FINISHED
    collect_dirs = list((tmp_path / "shuffle").glob("*/collect/*"))
    assert collect_dirs == []  # handed out completely: deleted at once
