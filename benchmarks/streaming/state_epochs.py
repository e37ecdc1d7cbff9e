"""Per-epoch cost of a keyed event-time window: flintlock's state-table loop against Spark
Structured Streaming's state store, on the same rows (the measurement issue 11 asks for before
choosing how a streaming subtask keeps keyed state).

    python -m benchmarks.streaming.state_epochs flintlock|ss-continuous|ss-available-now \\
        [EPOCHS] [ROWS]

Each epoch is ``ROWS`` rows ``(k, v, ts)`` over 100 keys with event times in the epoch's 5-second
slice; 10-second tumbling windows per key count rows and sum ``v``; the watermark before epoch
``e`` is ``e * 5 s - 1``, so every second epoch fires windows.

- ``flintlock``: ``TimedOperators`` over a ``WindowSpec`` as a streaming subtask runs it (Spark
  Connect, embedded ``local[2]`` server): the epoch's rows from Arrow, the window operator, the
  fired windows collected, the new state version written.
- ``ss-continuous``: one running Structured Streaming query (classic ``local[2]``) over a Python
  streaming data source that releases one epoch at a time; ``withWatermark`` + ``groupBy(window,
  k)`` in append mode to the ``noop`` sink; the figure is each micro-batch's
  ``durationMs.triggerExecution``.
- ``ss-available-now``: a new ``trigger(availableNow=True)`` query per epoch on the same
  checkpoint, as a subtask that started Spark per epoch would (wall time of each run).

Prints one JSON line: median and max over the epochs after the first five (warm-up), and the
first epoch's time, in seconds.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from typing import Any

KEYS, WINDOW_MS, STEP_MS = 100, 10_000, 5_000


def rows_of(epoch: int, n: int) -> list[tuple[str, int, int]]:
    base = epoch * STEP_MS
    return [(f"k{i % KEYS}", i, base + (i * 7919) % STEP_MS) for i in range(n)]


def flintlock(epochs: int, n: int) -> list[float]:
    import pyarrow as pa
    from pyspark.sql import functions as F

    from flintlock.api.windows import TumblingEventTimeWindows
    from flintlock.config import Configuration
    from flintlock.runtime.ids import OperatorID
    from flintlock.runtime.operators.specs import ChainedNode
    from flintlock.runtime.operators.time_specs import WindowSpec
    from flintlock.runtime.spark.session import SparkSessionProvider
    from flintlock.runtime.spark.timed_operators import TimedOperators

    spark = SparkSessionProvider(Configuration({})).get()
    spec = WindowSpec(("k",), TumblingEventTimeWindows.of(WINDOW_MS), "ts", "agg",
                      (F.count(F.lit(1)).alias("n"), F.sum("v").alias("s")))
    ops = TimedOperators(spark, lambda f: f(), tempfile.mkdtemp() + "/state")
    node = ChainedNode(OperatorID.generate(), "window", spec)
    out = []
    for e in range(epochs):
        k, v, ts = zip(*rows_of(e, n), strict=True)
        table = pa.table({"k": list(k), "v": list(v), "ts": list(ts)})
        started = time.perf_counter()
        ops.begin_epoch(e * STEP_MS - 1, 0)
        fired = ops.apply(0, node, spark.createDataFrame(table, "k string, v bigint, ts bigint"),
                          "window")
        fired.toArrow()
        ops.write_state()
        ops.end_epoch()
        out.append(time.perf_counter() - started)
    return out


def structured_streaming(epochs: int, n: int, available_now: bool) -> list[float]:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    spark = (SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    released = tempfile.mktemp()  # how many epochs the source offers (a file: read in workers)
    with open(released, "w") as fh:
        fh.write("0")

    def release(count: int) -> None:
        with open(released, "w") as fh:
            fh.write(str(count))

    class Reader(DataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:
            return {"epoch": 0}

        def latestOffset(self) -> dict[str, int]:
            with open(released) as fh:
                return {"epoch": int(fh.read())}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            return [InputPartition(e) for e in range(start["epoch"], end["epoch"])]

        def read(self, partition: Any) -> Any:
            import datetime

            for k, v, ts in rows_of(partition.value, n):
                yield (k, v, datetime.datetime.fromtimestamp(ts / 1000, datetime.UTC))

        def commit(self, end: dict[str, int]) -> None:
            pass

    class Epochs(DataSource):
        @classmethod
        def name(cls) -> str:
            return "epochs"

        def schema(self) -> str:
            return "k string, v bigint, ts timestamp"

        def streamReader(self, schema: Any) -> Reader:
            return Reader()

    spark.dataSource.register(Epochs)
    checkpoint = tempfile.mkdtemp()
    windows = (spark.readStream.format("epochs").load().withWatermark("ts", "0 seconds")
               .groupBy(F.window("ts", "10 seconds"), "k")
               .agg(F.count(F.lit(1)).alias("n"), F.sum("v").alias("s")))
    writer = (windows.writeStream.format("noop").outputMode("append")
              .option("checkpointLocation", checkpoint))
    out: list[float] = []
    if available_now:
        for e in range(epochs):
            release(e + 1)
            started = time.perf_counter()
            writer.trigger(availableNow=True).start().awaitTermination()
            out.append(time.perf_counter() - started)
        return out
    query = writer.trigger(processingTime="0 seconds").start()
    seen = 0
    for e in range(epochs):
        release(e + 1)
        while True:
            progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
            if len(progress) > seen:
                break
            time.sleep(0.01)
        seen = len(progress)
        out.append(progress[-1]["durationMs"]["triggerExecution"] / 1000)
    query.stop()
    return out


def main(argv: list[str]) -> int:
    what = argv[0]
    epochs = int(argv[1]) if len(argv) > 1 else 20
    n = int(argv[2]) if len(argv) > 2 else 5000
    times = flintlock(epochs, n) if what == "flintlock" else structured_streaming(
        epochs, n, what == "ss-available-now")
    warm = times[5:]
    print(json.dumps({"system": what, "rows_per_epoch": n, "epochs": epochs,
                      "median_s": round(statistics.median(warm), 3),
                      "max_s": round(max(warm), 3), "first_s": round(times[0], 3)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
