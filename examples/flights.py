"""nycflights13: arrival delay per carrier and month, with airline names.

Drops cancelled flights (null ``arr_delay``), computes mean/max arrival delay and the flight count
per (carrier, month), joins the airline names, sorts by carrier and month, writes the result as
Parquet through ``FileSink`` and returns the stream.

    python -m examples.flights --data data [--output output/flights]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

# DuckDB reference over the same files (``{flights}`` / ``{airlines}``: directories of Parquet files).
REFERENCE_SQL = """
SELECT
    f.carrier,
    a.name,
    f.month,
    count(*) AS flights,
    avg(f.arr_delay) AS mean_arr_delay,
    max(f.arr_delay) AS max_arr_delay
FROM read_parquet('{flights}/*.parquet') AS f
LEFT JOIN read_parquet('{airlines}/*.parquet') AS a ON f.carrier = a.carrier
WHERE f.arr_delay IS NOT NULL
GROUP BY f.carrier, a.name, f.month
ORDER BY f.carrier, f.month
"""
SORT_KEYS = [("carrier", False), ("month", False)]


def flights_path(data_dir: str | os.PathLike[str]) -> Path:
    p = Path(data_dir)
    return p if (p / "flights").is_dir() else p / "nycflights13"


def build(env: Any, data_dir: str, output: str | None = None) -> Any:
    from flintlock.connectors import FileSink, FileSource

    base = flights_path(data_dir)
    flights = env.from_source(FileSource.parquet(str(base / "flights")), "flights")
    airlines = env.from_source(FileSource.parquet(str(base / "airlines")), "airlines")
    per_carrier_month = (
        flights.filter(F.col("arr_delay").isNotNull())
        .select("carrier", "month", "arr_delay")
        .key_by("carrier", "month")
        .agg(
            F.count(F.lit(1)).alias("flights"),
            F.avg("arr_delay").alias("mean_arr_delay"),
            F.max("arr_delay").alias("max_arr_delay"),
        )
    )
    result = (
        per_carrier_month.join(airlines, on="carrier", how="left")
        .select("carrier", "name", "month", "flights", "mean_arr_delay", "max_arr_delay")
        .sort("carrier", "month")
    )
    if output is not None:
        result.sink_to(FileSink.parquet(str(output)))
    return result


def reference_sql(data_dir: str | os.PathLike[str]) -> str:
    base = flights_path(data_dir)
    return REFERENCE_SQL.format(
        flights=(base / "flights").as_posix(), airlines=(base / "airlines").as_posix()
    )


def has_parquet(path: str | os.PathLike[str]) -> bool:
    return any(Path(path).rglob("*.parquet"))


def main(argv: list[str] | None = None) -> int:
    import shutil

    from flintlock import RuntimeExecutionMode, StreamExecutionEnvironment

    p = argparse.ArgumentParser(description="nycflights13 arrival delays per carrier and month")
    p.add_argument("--data", default="data", help="data root (default ./data)")
    p.add_argument("--output", default="output/flights", help="Parquet output directory")
    args = p.parse_args(argv)
    shutil.rmtree(args.output, ignore_errors=True)  # FileSink refuses a target that holds data
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    t0 = time.perf_counter()
    # As in Flink, execute_and_collect runs the whole job, the FileSink included.
    rows = build(env, args.data, args.output).execute_and_collect()
    took = time.perf_counter() - t0
    for row in rows:
        print(row)
    print(f"{len(rows)} rows in {took:.2f}s; Parquet output in {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
