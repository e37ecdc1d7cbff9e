"""Many small jobs submitted at once: ``concurrent_jobs.py <n> <out dir>``.

Each job is ``from_sequence(1, 1000)`` -> ``key_by(id % 10)`` -> count and sum -> a Parquet
FileSink under ``<out dir>/<i>``, at parallelism 1; all ``n`` are submitted with
``execute_async`` before the first result is awaited (the load issue's "50 concurrent small
jobs").
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from pyspark.sql import functions as F

    from flintlock import RuntimeExecutionMode, StreamExecutionEnvironment
    from flintlock.connectors import FileSink

    n, out = int(argv[0]), argv[1]
    clients = []
    for i in range(n):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        env.set_parallelism(1)
        (env.from_sequence(1, 1000).select((F.col("id") % 10).alias("k"), "id").key_by("k")
         .agg(F.count(F.lit(1)).alias("n"), F.sum("id").alias("s"))
         .sink_to(FileSink.parquet(f"{out}/{i}")))
        clients.append(env.execute_async(f"small job {i}"))
    for client in clients:
        client.get_job_execution_result()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
