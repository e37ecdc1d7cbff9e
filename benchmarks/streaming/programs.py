"""The two streaming programs the benchmark runs, each in its own process (``python -m
benchmarks.streaming.programs flintlock|structured-streaming OUT RATE SECONDS``).

Both run the same three-stage pipeline at parallelism 2 on this machine's cores: events
``(id, word, created_ms)`` generated at ``RATE`` per second for ``SECONDS`` (``created_ms`` = the
wall clock when the event was generated) -> ``word`` upper-cased -> repartitioned by word ->
Parquet files under ``OUT`` (``id, word, created_ms``). Latency of an event = the modification
time of the file it was written to - ``created_ms``.

- flintlock: ``DataGeneratorSource`` with ``RateLimiterStrategy.per_second(RATE)`` -> rebalance
  -> ``with_column`` -> ``key_by("word")`` -> ``FileSink`` (three vertices, STREAMING mode, local
  cluster of one TaskManager with 2 slots; part files are written per epoch and published at the
  end, keeping their write time).
- Spark Structured Streaming: the ``rate`` source (``rowsPerSecond``, 2 partitions;
  ``created_ms`` = its ``timestamp``) -> ``upper`` -> ``repartition(2, word)`` -> the Parquet file
  sink, trigger as fast as possible, classic ``local[2]``; stopped after ``SECONDS``.
"""

from __future__ import annotations

import sys
import time
from typing import Any

WORDS = 7


def _event(i: int) -> tuple[int, str, int]:
    return (i, f"w{i % WORDS}", int(time.time() * 1000))


def run_flintlock(out: str, rate: int, seconds: float) -> None:
    from pyspark.sql import functions as F

    from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
    from flintlock.connectors import DataGeneratorSource, FileSink, RateLimiterStrategy

    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration({"local.number-taskmanager": 1, "taskmanager.numberOfTaskSlots": 2}))
    env.set_parallelism(2).set_runtime_mode(RuntimeExecutionMode.STREAMING)
    source = DataGeneratorSource(_event, int(rate * seconds), RateLimiterStrategy.per_second(rate),
                                 "id long, word string, created_ms long")
    (env.from_source(source, "events").rebalance()
     .with_column("word", F.upper(F.col("word")))
     .key_by("word").sink_to(FileSink.parquet(out)))
    env.execute("streaming benchmark")


def run_structured_streaming(out: str, rate: int, seconds: float) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (SparkSession.builder.master("local[2]").appName("ss-benchmark")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    events = (spark.readStream.format("rate").option("rowsPerSecond", rate)
              .option("numPartitions", 2).load()
              .select(F.col("value").alias("id"),
                      F.concat(F.lit("w"), (F.col("value") % WORDS).cast("string")).alias("word"),
                      F.unix_millis(F.col("timestamp")).alias("created_ms")))
    query = (events.withColumn("word", F.upper("word")).repartition(2, "word")
             .writeStream.format("parquet").option("checkpointLocation", out + "-checkpoint")
             .trigger(processingTime="0 seconds").start(out))
    started = time.monotonic()
    while time.monotonic() - started < seconds and query.isActive:
        time.sleep(0.2)
    query.stop()
    spark.stop()


def main(argv: list[str]) -> int:
    system, out, rate, seconds = argv[0], argv[1], int(argv[2]), float(argv[3])
    runners: dict[str, Any] = {"flintlock": run_flintlock,
                               "structured-streaming": run_structured_streaming}
    runners[system](out, rate, seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
