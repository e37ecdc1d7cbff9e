"""TPC-H Q5: local supplier volume (revenue per nation of a region).

    python -m examples.tpch.q5 --data data
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
    # REGION = 'ASIA', DATE = 1994-01-01
    region = table(env, data_dir, "region").filter(F.col("r_name") == "ASIA").select("r_regionkey")
    nation = (
        table(env, data_dir, "nation")
        .select("n_nationkey", "n_name", "n_regionkey")
        .join(region, left_on=["n_regionkey"], right_on=["r_regionkey"], how="semi")
        .select("n_nationkey", "n_name")
    )
    supplier = (
        table(env, data_dir, "supplier")
        .select("s_suppkey", "s_nationkey")
        .join(nation, left_on=["s_nationkey"], right_on=["n_nationkey"])
        .select("s_suppkey", "s_nationkey", "n_name")
    )
    customer = table(env, data_dir, "customer").select("c_custkey", "c_nationkey")
    orders = (
        table(env, data_dir, "orders")
        .filter(
            (F.col("o_orderdate") >= date("1994-01-01")) & (F.col("o_orderdate") < date("1995-01-01"))
        )
        .select("o_orderkey", "o_custkey")
    )
    lineitem = table(env, data_dir, "lineitem").select(
        "l_orderkey", "l_suppkey", disc_price().alias("volume")
    )
    customer_orders = orders.join(customer, left_on=["o_custkey"], right_on=["c_custkey"]).select(
        "o_orderkey", "c_nationkey"
    )
    return (
        lineitem.join(customer_orders, left_on=["l_orderkey"], right_on=["o_orderkey"])
        .join(supplier, left_on=["l_suppkey", "c_nationkey"], right_on=["s_suppkey", "s_nationkey"])
        .key_by("n_name")
        .agg(F.sum("volume").alias("revenue"))
        .sort(F.col("revenue").desc())
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q5: local supplier volume", argv)


if __name__ == "__main__":
    raise SystemExit(main())
