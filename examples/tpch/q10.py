"""TPC-H Q10: returned item reporting (top 20 customers by lost revenue).

    python -m examples.tpch.q10 --data data
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
    # DATE = 1993-10-01 (three months)
    orders = (
        table(env, data_dir, "orders")
        .filter(
            (F.col("o_orderdate") >= date("1993-10-01")) & (F.col("o_orderdate") < date("1994-01-01"))
        )
        .select("o_orderkey", "o_custkey")
    )
    lineitem = (
        table(env, data_dir, "lineitem")
        .filter(F.col("l_returnflag") == "R")
        .select("l_orderkey", disc_price().alias("volume"))
    )
    customer = table(env, data_dir, "customer").select(
        "c_custkey", "c_name", "c_acctbal", "c_phone", "c_address", "c_comment", "c_nationkey"
    )
    nation = table(env, data_dir, "nation").select("n_nationkey", "n_name")
    per_customer = (
        lineitem.join(orders, left_on=["l_orderkey"], right_on=["o_orderkey"])
        .key_by("o_custkey")
        .agg(F.sum("volume").alias("revenue"))
    )
    return (
        per_customer.join(customer, left_on=["o_custkey"], right_on=["c_custkey"])
        .join(nation, left_on=["c_nationkey"], right_on=["n_nationkey"])
        .select(
            "c_custkey",
            "c_name",
            "revenue",
            "c_acctbal",
            "n_name",
            "c_address",
            "c_phone",
            "c_comment",
        )
        .sort(F.col("revenue").desc(), F.col("c_custkey"))
        .limit(20)
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q10: returned item reporting", argv)


if __name__ == "__main__":
    raise SystemExit(main())
