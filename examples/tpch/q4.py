"""TPC-H Q4: order priority checking (orders with a late line item, per priority).

    python -m examples.tpch.q4 --data data
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository's `examples` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from typing import Any

from pyspark.sql import functions as F

from examples.tpch._common import date, run_main, table


def build(env: Any, data_dir: str) -> Any:
    # DATE = 1993-07-01 (three months)
    orders = (
        table(env, data_dir, "orders")
        .filter(
            (F.col("o_orderdate") >= date("1993-07-01"))
            & (F.col("o_orderdate") < date("1993-10-01"))
        )
        .select("o_orderkey", "o_orderpriority")
    )
    late = (
        table(env, data_dir, "lineitem")
        .filter(F.col("l_commitdate") < F.col("l_receiptdate"))
        .select("l_orderkey")
    )
    return (
        orders.join(late, left_on=["o_orderkey"], right_on=["l_orderkey"], how="semi")
        .key_by("o_orderpriority")
        .agg(F.count("*").alias("order_count"))
        .sort("o_orderpriority")
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q4: order priority checking", argv)


if __name__ == "__main__":
    raise SystemExit(main())
