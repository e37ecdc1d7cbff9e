"""Small-job latency: a 1,000-row, two-vertex job submitted again and again, one at a time.

    flintlock run --target remote benchmarks/programs/small_job.py --repeat 12 --out runs.json

Each job is ``from_sequence(1, 1000)`` -> ``key_by(id % 10)`` -> count and sum -> collect, at
parallelism 1: a source vertex and, behind a HASH exchange, an aggregating vertex with the collect
sink chained. ``client_s`` is ``execute_and_collect()`` as the program sees it (compile, submit,
wait for FINISHED, fetch the rows); the harness adds the JobManager's own submit-to-FINISHED
duration from REST. Every answer is checked (10 keys, 100 rows each, the right sums).
"""

from __future__ import annotations

import argparse
import json
import time


def main(argv: list[str] | None = None) -> int:
    from pyspark.sql import functions as F

    from flintlock import RuntimeExecutionMode, StreamExecutionEnvironment
    from flintlock.client.context import current_context

    p = argparse.ArgumentParser(description="small-job latency")
    p.add_argument("--repeat", type=int, default=12)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    expected = {k: (100, sum(i for i in range(1, 1001) if i % 10 == k)) for k in range(10)}
    runs = []
    for i in range(args.repeat):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        env.set_parallelism(1)
        stream = (
            env.from_sequence(1, 1000)
            .select((F.col("id") % 10).alias("k"), "id")
            .key_by("k")
            .agg(F.count(F.lit(1)).alias("n"), F.sum("id").alias("s"))
        )
        t0 = time.perf_counter()
        rows = stream.execute_and_collect(job_execution_name=f"small job {i}")
        client_s = time.perf_counter() - t0
        got = {r["k"]: (r["n"], r["s"]) for r in rows}
        if got != expected:
            raise SystemExit(f"small job {i}: wrong answer {sorted(got.items())}")
        runs.append({"client_s": client_s, "job_id": current_context().submitted[-1]})
    with open(args.out, "w") as fh:
        json.dump(runs, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
