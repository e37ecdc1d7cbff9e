"""Savepoints of STREAMING jobs on the local cluster: stop with a savepoint, change the program,
resume from the savepoint; stop with and without drain.

A keyed running count (``ValueState``) over one in-order source writes ``(key, n)`` for every
row. The first run is stopped with a savepoint part-way; the second run (with a stateless
operator added) resumes from it. Together the two runs' committed files hold every
``(key, 1..n)`` exactly once: the source resumed at its offset, the counts at their state, and
nothing after the savepoint was published by the stopped run. Operators without ``uid()`` cannot
be matched: the restore fails naming the cause, unless non-restored state is allowed. A stopped
job FINISHES: without drain its open event-time windows stay in the savepoint and fire in the
resumed job (every row counted once over both runs); with drain they fire before it finishes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.api import RestartStrategies
from flintlock.client.job_client import JobExecutionException
from flintlock.connectors import DataGeneratorSource, FileSink, RateLimiterStrategy
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.testing.state_functions import RunningCount
from flintlock.testing.waiting import wait_until_sync

pytestmark = [pytest.mark.spark]

N = 3000
SCHEMA = "id long, k string"


def _event(i: int) -> tuple[int, str]:
    return (i, f"k{i % 3}")


def _env(**settings: Any) -> StreamExecutionEnvironment:
    conf = Configuration({"local.number-taskmanager": 2, "taskmanager.numberOfTaskSlots": 2,
                          **settings})
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_restart_strategy(RestartStrategies.no_restart())
    return env


def _program(env: StreamExecutionEnvironment, out: Path, uids: bool = True,
             added_operator: bool = False, rate: int = 300) -> None:
    source = DataGeneratorSource(_event, N, RateLimiterStrategy.per_second(rate), SCHEMA)
    events = env.from_source(source).set_parallelism(1)
    if uids:
        events = events.uid("events")
    if added_operator:  # a stateless operator that was not there when the savepoint was taken
        events = events.filter("id >= 0").set_parallelism(1)
    counts = events.key_by("k").process(RunningCount(), "k string, n long")
    if uids:
        counts = counts.uid("counts")
    counts.sink_to(FileSink.parquet(str(out)))


def _status(client: Any) -> JobStatus:
    status = client.get_job_status()
    return status.result() if hasattr(status, "result") else status


def _rows_into(client: Any, vertex: str) -> int:
    graph = client.get_job_details()
    return sum(s.live.records_in for v in graph.vertices if vertex in v.name
               for s in v.subtasks if s.live is not None)


def _stop_part_way(env: StreamExecutionEnvironment, savepoints: Path, vertex: str = "Process",
                   drain: bool = False) -> tuple[str, Any]:
    """Run the job until ``vertex`` received 600 rows, then stop it with a savepoint; the
    savepoint's path and the job's client once it FINISHED."""
    client = env.execute_async("first run")
    wait_until_sync(lambda: _rows_into(client, vertex) >= 600, 120,
                    describe=lambda: _rows_into(client, vertex))
    path = client.stop_with_savepoint(str(savepoints), drain=drain)
    wait_until_sync(lambda: _status(client) is JobStatus.FINISHED, 60,
                    describe=lambda: _status(client))
    return path, client


def _counts(*outs: Path) -> list[tuple[str, int]]:
    rows = [r for out in outs if out.exists() for r in pq.read_table(out).to_pylist()]
    return sorted((r["k"], r["n"]) for r in rows)


EXPECTED = sorted((f"k{k}", n) for k in range(3) for n in range(1, N // 3 + 1))


def test_stop_with_savepoint_then_a_changed_program_resumes_exactly(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    env = _env()
    _program(env, first)
    path, _ = _stop_part_way(env, tmp_path / "savepoints")
    assert Path(path, "_metadata").is_file() and Path(path).parent == tmp_path / "savepoints"
    stopped = _counts(first)
    assert 0 < len(stopped) < N, len(stopped)  # stopped part-way, its output published
    resumed = _env(**{"execution.savepoint.path": path})
    _program(resumed, second, added_operator=True, rate=3000)
    resumed.execute("second run")
    assert _counts(first, second) == EXPECTED


def test_operators_without_uid_cannot_be_matched_unless_allowed(tmp_path: Path) -> None:
    env = _env()
    _program(env, tmp_path / "first", uids=False)
    path, _ = _stop_part_way(env, tmp_path / "savepoints")
    again = _env(**{"execution.savepoint.path": path})
    _program(again, tmp_path / "refused", uids=False, rate=3000)
    with pytest.raises(JobExecutionException) as info:
        again.execute("refused")
    text = str(info.value) + str(info.value.__cause__)
    assert "Cannot map checkpoint/savepoint state" in text and "uid" in text, text
    allowed = _env(**{"execution.savepoint.path": path,
                      "execution.savepoint.ignore-unclaimed-state": "true"})
    _program(allowed, tmp_path / "fresh", uids=False, rate=3000)
    allowed.execute("allowed")
    assert _counts(tmp_path / "fresh") == EXPECTED  # the state was dropped: counts from 1


def test_a_savepoint_path_that_does_not_exist_fails_the_job_clearly(tmp_path: Path) -> None:
    env = _env(**{"execution.savepoint.path": str(tmp_path / "nowhere")})
    _program(env, tmp_path / "out", rate=3000)
    with pytest.raises(JobExecutionException) as info:
        env.execute("no savepoint")
    text = str(info.value) + str(info.value.__cause__)
    assert "does not exist" in text and "nowhere" in text, text


def _hourly_counts(env: StreamExecutionEnvironment, out: Path, rate: int = 100) -> None:
    """Counts per key in one 1-hour event-time window (rows at 1 ms apart): it fires only at
    the end of input (or a drain)."""
    from pyspark.sql import functions as F

    from flintlock.api.watermarks import WatermarkStrategy
    from flintlock.api.windows import TumblingEventTimeWindows

    source = DataGeneratorSource(lambda i: (i, f"k{i % 3}", i), N,
                                 RateLimiterStrategy.per_second(rate), "id long, k string, ts long")
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column("ts")
    (env.from_source(source).uid("rows")
     .assign_timestamps_and_watermarks(strategy).uid("timestamps")
     .key_by("k").window(TumblingEventTimeWindows.of(3_600_000))
     .agg(F.count(F.lit(1)).alias("n")).uid("window")
     .sink_to(FileSink.parquet(str(out))))


def _window_rows(*outs: Path) -> list[tuple[str, int]]:
    rows = [r for out in outs if out.exists() for r in pq.read_table(out).to_pylist()]
    return sorted((r["k"], r["n"]) for r in rows)


@pytest.mark.timeout(300)
def test_stop_without_drain_keeps_open_windows_in_the_savepoint(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    env = _env()
    _hourly_counts(env, first)
    path, _ = _stop_part_way(env, tmp_path / "savepoints", "Window")
    assert _window_rows(first) == []  # FINISHED without firing the open window
    resumed = _env(**{"execution.savepoint.path": path})
    _hourly_counts(resumed, second, rate=3000)
    resumed.execute("resumed")
    # the window fired once, in the resumed job, with the rows of both runs
    assert _window_rows(first, second) == [(f"k{k}", N // 3) for k in range(3)]


def test_stop_with_drain_fires_the_windows_before_the_job_finishes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = _env()
    _hourly_counts(env, out)
    path, client = _stop_part_way(env, tmp_path / "savepoints", "Window", drain=True)
    assert Path(path, "_metadata").is_file()
    rows = _window_rows(out)
    assert [k for k, _ in rows] == ["k0", "k1", "k2"], rows
    # what was read before the stop, once: at least what the window had seen
    assert 600 <= sum(n for _, n in rows) < N, rows
    (window,) = [v for v in client.get_job_details().vertices if "Window" in v.name]
    assert sum(n for _, n in rows) == window.metrics().records_in  # every row it received
