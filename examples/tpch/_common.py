"""Shared pieces of the TPC-H examples: table sources, the revenue expression and ``main()``."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F


def tpch_path(data_dir: str | os.PathLike[str]) -> Path:
    """``data_dir`` may be a TPC-H directory itself or a data root holding one ``tpch-sf*``."""
    p = Path(data_dir)
    if (p / "lineitem").is_dir():
        return p
    found = sorted(p.glob("tpch-sf*"))
    if len(found) == 1:
        return found[0]
    if (p / "tpch-sf1").is_dir():
        return p / "tpch-sf1"
    raise FileNotFoundError(
        f"no TPC-H data in {p} (expected {p}/lineitem or one {p}/tpch-sf<SF>; "
        "run `python -m examples.data --sf 1 --out data`)"
    )


def table(env: Any, data_dir: str | os.PathLike[str], name: str) -> Any:
    """A DataStream reading TPC-H table ``name`` (a directory of Parquet files)."""
    from flintlock.connectors import FileSource

    return env.from_source(FileSource.parquet(str(tpch_path(data_dir) / name)), name)


def date(s: str) -> Column:
    return F.lit(s).cast("date")


def disc_price() -> Column:
    """``l_extendedprice * (1 - l_discount)``."""
    return F.col("l_extendedprice") * (F.lit(1) - F.col("l_discount"))


def run_main(build: Callable[[Any, str], Any], description: str, argv: list[str] | None = None) -> int:
    from flintlock import RuntimeExecutionMode, StreamExecutionEnvironment

    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data", default="data", help="data root or TPC-H directory (default ./data)")
    p.add_argument("--parallelism", type=int, default=None)
    args = p.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    if args.parallelism:
        env.set_parallelism(args.parallelism)
    t0 = time.perf_counter()
    rows = build(env, args.data).execute_and_collect()
    took = time.perf_counter() - t0
    for row in rows:
        print(row)
    print(f"{len(rows)} rows in {took:.2f}s")
    return 0


def dec(s: str) -> Column:
    """A DECIMAL literal (``dec("0.05")``), so comparisons with DECIMAL columns stay exact.

    DECIMAL(15,2) like TPC-H's money columns, or with more places when ``s`` has them
    (``dec("0.0001")`` is DECIMAL(15,4)).
    """
    scale = max(2, len(s.partition(".")[2]))
    return F.lit(s).cast(f"decimal(15,{scale})")
