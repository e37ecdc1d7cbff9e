"""TPC-H Q3: shipping priority (top 10 unshipped orders by revenue).

    python -m examples.tpch.q3 --data data
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository's `examples` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from typing import Any

from pyspark.sql import functions as F

from examples.tpch._common import date, disc_price, run_main, table


def build(env: Any, data_dir: str) -> Any:
    # SEGMENT = 'BUILDING', DATE = 1995-03-15
    customer = (
        table(env, data_dir, "customer")
        .filter(F.col("c_mktsegment") == "BUILDING")
        .select("c_custkey")
    )
    orders = (
        table(env, data_dir, "orders")
        .filter(F.col("o_orderdate") < date("1995-03-15"))
        .select("o_orderkey", "o_custkey", "o_orderdate", "o_shippriority")
    )
    lineitem = (
        table(env, data_dir, "lineitem")
        .filter(F.col("l_shipdate") > date("1995-03-15"))
        .select("l_orderkey", disc_price().alias("volume"))
    )
    building_orders = orders.join(customer, left_on=["o_custkey"], right_on=["c_custkey"], how="semi")
    return (
        lineitem.join(building_orders, left_on=["l_orderkey"], right_on=["o_orderkey"])
        .key_by("l_orderkey", "o_orderdate", "o_shippriority")
        .agg(F.sum("volume").alias("revenue"))
        .select("l_orderkey", "revenue", "o_orderdate", "o_shippriority")
        .sort(F.col("revenue").desc(), F.col("o_orderdate"))
        .limit(10)
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q3: shipping priority", argv)


if __name__ == "__main__":
    raise SystemExit(main())
