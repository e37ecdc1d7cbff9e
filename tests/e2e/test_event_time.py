"""Event time, windows and keyed state in STREAMING jobs on the local cluster.

Generated streams with known event times go through watermark assigners on two source subtasks,
a key_by exchange (the window operator's watermark is the minimum over both channels) and
windows or a ``KeyedProcessFunction``; results are checked against the same computation done
directly in Python over the whole input, and against the same program run in BATCH mode.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.api import InvalidProgramException, KeyedProcessFunction, RestartStrategies
from flintlock.api.state import ValueStateDescriptor
from flintlock.api.watermarks import WatermarkStrategy
from flintlock.api.windows import OutputTag, TumblingEventTimeWindows
from flintlock.client.job_client import JobExecutionException
from flintlock.connectors import DataGeneratorSource, FileSink, RateLimiterStrategy

pytestmark = [pytest.mark.spark]

N = 3000
SCHEMA = "id long, k string, ts long"


def _env(mode: RuntimeExecutionMode = RuntimeExecutionMode.STREAMING, **settings: Any) -> StreamExecutionEnvironment:
    conf = Configuration({"local.number-taskmanager": 2, "taskmanager.numberOfTaskSlots": 2,
                          **settings})
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.set_restart_strategy(RestartStrategies.no_restart())
    return env.set_runtime_mode(mode)


def _event(i: int) -> tuple[int, str, int]:
    """Event i at about 10 ms * i, every fifth one 40 ms out of order."""
    return (i, f"k{i % 3}", i * 10 - (40 if i % 5 == 0 else 0))


def _events(env: StreamExecutionEnvironment, rate: int | None = 3000) -> Any:
    limit = RateLimiterStrategy.per_second(rate) if rate else None
    source = DataGeneratorSource(_event, N, limit, SCHEMA)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(50).with_timestamp_column("ts")
    return env.from_source(source).assign_timestamps_and_watermarks(strategy)


def _expected_windows(size: int) -> dict[tuple[str, int], tuple[int, int]]:
    out: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for i in range(N):
        _, k, ts = _event(i)
        acc = out[(k, ts - ts % size)]
        acc[0] += 1
        acc[1] += i
    return {key: (n, s) for key, (n, s) in out.items()}


def _window_rows(table: Any) -> dict[tuple[str, int], tuple[int, int]]:
    rows = table.to_pylist()
    return {(r["k"], int(r["window_start"].timestamp() * 1000)): (r["n"], r["s"]) for r in rows}


def test_tumbling_event_time_windows_write_every_window_once_into_files(tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    out = tmp_path / "windows"
    env = _env()
    _events(env, rate=1000).key_by("k").window(TumblingEventTimeWindows.of(1000)).agg(
        F.count(F.lit(1)).alias("n"), F.sum("id").alias("s")).sink_to(FileSink.parquet(str(out)))
    env.execute("tumbling")
    table = pq.read_table(out)
    assert _window_rows(table) == _expected_windows(1000)
    assert table.num_rows == len(_expected_windows(1000))  # each window fired exactly once
    # epochs that fired no window left no part file (Spark's write of no rows leaves one)
    parts = {p.name: pq.read_metadata(p).num_rows for p in out.glob("part-*")}
    assert parts and all(parts.values()), parts


@pytest.mark.timeout(90)  # windows that waited for the end of the input would never come
def test_tumbling_event_time_windows_fire_while_an_unbounded_stream_runs() -> None:
    """Windows reach the client while the source still generates: they fire as the watermark
    passes them, not when the input ends (it never does; closing the results cancels the job)."""
    from pyspark.sql import functions as F

    env = _env()
    source = DataGeneratorSource(_event, None, RateLimiterStrategy.per_second(1000), SCHEMA)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(50).with_timestamp_column("ts")
    results = (env.from_source(source).assign_timestamps_and_watermarks(strategy).key_by("k")
               .window(TumblingEventTimeWindows.of(1000))
               .agg(F.count(F.lit(1)).alias("n"), F.sum("id").alias("s")).execute_and_collect())
    try:
        fired = [next(results) for _ in range(6)]
    finally:
        results.close()
    expected = _expected_windows(1000)  # the first 30 s of event time, in closed form
    got = {(r.k, int(r.window_start.timestamp() * 1000)): (r.n, r.s) for r in fired}
    assert len(got) == 6 and all(got[key] == expected[key] for key in got), (got, expected)


def test_the_same_window_program_in_batch_mode_gives_the_same_windows() -> None:
    from pyspark.sql import functions as F

    env = _env(RuntimeExecutionMode.BATCH)
    rows = list(_events(env, rate=None).key_by("k").window(TumblingEventTimeWindows.of(1000))
                .agg(F.count(F.lit(1)).alias("n"), F.sum("id").alias("s")).execute_and_collect())
    got = {(r.k, int(r.window_start.timestamp() * 1000)): (r.n, r.s) for r in rows}
    assert got == _expected_windows(1000)


def _very_late(i: int) -> tuple[int, str, int]:
    """Event i at 10 ms * i; events 5000 and 5001 claim to be from the first second."""
    return (i, "k", 5 if i in (5000, 5001) else i * 10)


def test_rows_too_late_for_every_window_go_to_the_side_output(tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    # one source subtask and one credit: every window epoch takes one segment, and a segment
    # holds at most one second (3000 rows) of the rate, so the segment with events 5000/5001
    # comes after one that took the watermark past 2000 * 10 ms, far past their window
    env = _env(**{"taskmanager.network.memory.buffers-per-channel": 1,
                  "taskmanager.network.memory.floating-buffers-per-gate": 0})
    source = DataGeneratorSource(_very_late, 6000, RateLimiterStrategy.per_second(3000), SCHEMA)
    late = OutputTag("late")
    windows = (env.from_source(source).set_parallelism(1)
               .assign_timestamps_and_watermarks(
                   WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column("ts"))
               .set_parallelism(1).key_by("k").window(TumblingEventTimeWindows.of(1000)).allowed_lateness(100)
               .side_output_late_data(late).agg(F.count(F.lit(1)).alias("n")))
    windows.sink_to(FileSink.parquet(str(tmp_path / "windows")))
    windows.get_side_output(late).sink_to(FileSink.parquet(str(tmp_path / "late")))
    env.execute("late data")
    assert sorted(pq.read_table(tmp_path / "late").column("id").to_pylist()) == [5000, 5001]
    counts = {int(r["window_start"].timestamp() * 1000): r["n"]
              for r in pq.read_table(tmp_path / "windows").to_pylist()}
    assert counts[0] == 100 and sum(counts.values()) == 6000 - 2, counts


class ThreeWithinASecond(KeyedProcessFunction):
    """Alert when a key has three events within one second of event time (state + timers):
    a window opens at a key's first event; its timer closes it one second later."""

    def open(self, runtime_context: Any) -> None:
        self.opened = runtime_context.get_state(ValueStateDescriptor("opened"))
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        if self.opened.value() is None:
            self.opened.update(ctx.timestamp())
            self.count.update(0)
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1000)
        self.count.update(self.count.value() + 1)
        if self.count.value() == 3:
            yield (ctx.get_current_key(), self.opened.value(), ctx.timestamp())

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        self.opened.clear()
        self.count.clear()


def _sparse(i: int) -> tuple[int, str, int]:
    """Events in time order, 97 ms apart, on keys k0..k4 in an irregular pattern (i*i % 7)."""
    return (i, f"k{(i * i) % 7 % 5}", i * 97)


def _expected_alerts() -> set[tuple[str, int, int]]:
    by_key: dict[str, list[int]] = defaultdict(list)
    for i in range(400):
        _, k, ts = _sparse(i)
        by_key[k].append(ts)
    alerts = set()
    for k, times in by_key.items():
        opened, count = None, 0
        for t in sorted(times):
            if opened is not None and t >= opened + 1000:
                opened = None
            if opened is None:
                opened, count = t, 0
            count += 1
            if count == 3:
                alerts.add((k, opened, t))
    return alerts


@pytest.mark.parametrize("mode", [RuntimeExecutionMode.STREAMING, RuntimeExecutionMode.BATCH])
def test_a_keyed_process_function_with_state_and_timers(mode: RuntimeExecutionMode) -> None:
    env = _env(mode)
    rate = RateLimiterStrategy.per_second(800) if mode is RuntimeExecutionMode.STREAMING else None
    source = DataGeneratorSource(_sparse, 400, rate, SCHEMA)
    # one source subtask with monotonous timestamps: the rows reach the function in time order,
    # so the result is the in-order computation (Flink processes rows in arrival order)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column("ts")
    alerts = (env.from_source(source).set_parallelism(1)
              .assign_timestamps_and_watermarks(strategy).set_parallelism(1).key_by("k")
              .process(ThreeWithinASecond(), "k string, opened long, third long"))
    got = {(r.k, r.opened, r.third) for r in alerts.execute_and_collect()}
    assert got == _expected_alerts() and got


def test_an_event_time_window_without_event_time_is_refused_at_compile_time() -> None:
    env = _env()
    source = DataGeneratorSource(_event, 10, None, SCHEMA)
    with pytest.raises(InvalidProgramException, match="an event-time window needs event time"):
        env.from_source(source).key_by("k").window(TumblingEventTimeWindows.of(1000))


def test_a_watermark_on_a_string_column_fails_the_job_naming_the_operator() -> None:
    env = _env()
    source = DataGeneratorSource(lambda i: (i, "k", str(i)), 10, None, "id long, k string, ts string")
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column("ts")
    env.from_source(source).assign_timestamps_and_watermarks(strategy).print()
    with pytest.raises(JobExecutionException) as info:
        env.execute("bad event time")
    text = str(info.value) + str(info.value.__cause__)
    assert "Timestamps/Watermarks" in text and "'ts' is a string" in text, text


def _timed(i: int) -> tuple[int, str, int]:
    return (i, "k", i * 10)


def test_an_idle_input_stops_holding_back_the_watermark(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A union of a generator and a watched directory nobody writes to: without idleness the
    empty directory's channel would hold the window's watermark back forever; with
    ``with_idleness`` the windows of the generated events fire while the job runs."""
    from pyspark.sql import functions as F

    from flintlock.connectors import FileSource
    from flintlock.runtime.jobgraph.types import JobStatus
    from flintlock.testing.waiting import wait_until_sync

    incoming = tmp_path / "incoming"
    incoming.mkdir()
    env = _env()
    strategy = (WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column("ts")
                .with_idleness(300))
    generated = env.from_source(DataGeneratorSource(_timed, 3000, RateLimiterStrategy
                                                    .per_second(1000), SCHEMA))
    watched = env.from_source(FileSource.csv(str(incoming), schema=SCHEMA)
                              .monitor_continuously(100))
    (generated.assign_timestamps_and_watermarks(strategy)
     .union(watched.assign_timestamps_and_watermarks(strategy))
     .key_by("k").window(TumblingEventTimeWindows.of(1000))
     .agg(F.count(F.lit(1)).alias("n")).print())
    client = env.execute_async("idle input")
    printed: list[str] = []

    def windows_fired() -> bool:
        printed.extend(capsys.readouterr().out.splitlines())
        return sum("n=100)" in line for line in printed) >= 5

    def status() -> JobStatus:
        s = client.get_job_status()
        return s.result() if hasattr(s, "result") else s

    try:
        wait_until_sync(windows_fired, 120, 0.05, lambda: printed[-5:])
        assert status() is JobStatus.RUNNING  # the watched directory keeps it running
    finally:
        client.cancel()
        wait_until_sync(lambda: status() is JobStatus.CANCELED, 30, 0.05, status)
