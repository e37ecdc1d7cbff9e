"""Savepoints of STREAMING jobs on the local cluster: stop with a savepoint, change the program,
resume from the savepoint; stop with and without drain.

A keyed running count (``ValueState``) over one in-order source writes ``(key, n)`` for every
row. The first run is stopped with a savepoint part-way; the second run (with a stateless
operator added) resumes from it. Together the two runs' committed files hold every
``(key, 1..n)`` exactly once: the source resumed at its offset, the counts at their state, and
nothing after the savepoint was published by the stopped run. Operators without ``uid()`` cannot
be matched: the restore fails naming the cause, unless non-restored state is allowed. State that
changed under the same uid (another kind of operator, other key columns, a value state become a
list state) fails the restore with a message naming the change, allowed or not, and without
restarting (100 restarts would be allowed). A stopped
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
             added_operator: bool = False, rate: int = 100) -> None:
    # 100 rows/s by default: the source still runs (30 s) when the keyed process's first epoch
    # ends, which takes ~15 s on a cold Spark session, so a stop part-way finds it running
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


class _RunningCountAsList(RunningCount):
    """``RunningCount`` changed: its "count" became a list state."""

    def open(self, runtime_context: Any) -> None:
        from flintlock.api.state import ListStateDescriptor

        self.count = runtime_context.get_list_state(ListStateDescriptor("count"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.count.add(1)
        yield (ctx.get_current_key(), len(self.count.get()))


def _changed_counts(env: StreamExecutionEnvironment, out: Path, change: str) -> None:
    """``_program`` with the operator under uid "counts" changed."""
    from pyspark.sql import functions as F

    from flintlock.api.windows import TumblingProcessingTimeWindows

    events = env.from_source(DataGeneratorSource(_event, N, RateLimiterStrategy.per_second(3000),
                                                 SCHEMA)).set_parallelism(1).uid("events")
    if change == "window":
        counts = (events.key_by("k").window(TumblingProcessingTimeWindows.of(1000))
                  .agg(F.count(F.lit(1)).alias("n")))
    elif change == "key":
        counts = events.key_by("id").process(RunningCount(), "id long, n long")
    else:
        counts = events.key_by("k").process(_RunningCountAsList(), "k string, n long")
    counts.uid("counts").sink_to(FileSink.parquet(str(out)))


@pytest.mark.timeout(300)
def test_state_changed_under_the_same_uid_fails_the_restore_clearly(tmp_path: Path) -> None:
    env = _env()
    _program(env, tmp_path / "first")
    path, _ = _stop_part_way(env, tmp_path / "savepoints")
    expected = {
        # refused at submission: the savepoint records each operator's kind of state
        "window": ("written by a KeyedProcessFunction", "is a window operator"),
        # found by the task once it sees its input: a key column of another type
        "key": ("key 1 string -> bigint", "other key or input columns"),
        # found by the function's Spark worker: a value state asked for as a list state
        "kind": ("StateMigrationException", "'count' was restored as a value state"),
    }
    for change, phrases in expected.items():
        again = _env(**{"execution.savepoint.path": path,  # even with unclaimed state allowed
                        "execution.savepoint.ignore-unclaimed-state": "true"})
        again.set_restart_strategy(RestartStrategies.fixed_delay_restart(100, 0))
        _changed_counts(again, tmp_path / change, change)
        client = again.execute_async(f"changed {change}")
        with pytest.raises(JobExecutionException) as info:
            client.get_job_execution_result(120)
        text = str(info.value) + str(info.value.__cause__)
        assert all(p in text for p in phrases) and "new uid()" in text, (change, text)
        assert client.get_job_details().number_of_restarts == 0, change  # no restart can fix it
        assert not (tmp_path / change).exists() or _counts(tmp_path / change) == [], change


@pytest.mark.parametrize("savepoint", ["missing", "corrupt"])
def test_a_savepoint_that_does_not_exist_or_is_corrupt_fails_the_job_clearly(
        tmp_path: Path, savepoint: str) -> None:
    path = tmp_path / "nowhere"
    if savepoint == "corrupt":  # a savepoint directory whose _metadata was cut short
        path = tmp_path / "savepoint-cut"
        path.mkdir()
        (path / "_metadata").write_text('{"checkpoint_id": 3, "tasks": {"v/0": {"opera')
    env = _env(**{"execution.savepoint.path": str(path)})
    _program(env, tmp_path / "out", rate=3000)
    with pytest.raises(JobExecutionException) as info:
        env.execute("no savepoint")
    text = str(info.value) + str(info.value.__cause__)
    cause = "does not exist" if savepoint == "missing" else "is not checkpoint metadata"
    assert cause in text and path.name in text, text
    assert not (tmp_path / "out").exists() or _counts(tmp_path / "out") == []


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
