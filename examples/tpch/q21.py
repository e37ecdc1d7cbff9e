"""TPC-H Q21: suppliers who kept orders waiting (the only late supplier of a multi-supplier order).

    python -m examples.tpch.q21 --data data
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository's `examples` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from typing import Any

from pyspark.sql import functions as F

from examples.tpch._common import run_main, table


def build(env: Any, data_dir: str) -> Any:
    # NATION = 'SAUDI ARABIA'. EXISTS (another supplier in the order) and NOT EXISTS (another
    # late supplier in the order) from per-order counts of distinct suppliers: a late line
    # qualifies when its order has more than one supplier and exactly one late supplier (its own).
    lineitem = table(env, data_dir, "lineitem").select(
        "l_orderkey", "l_suppkey", (F.col("l_receiptdate") > F.col("l_commitdate")).alias("late")
    )
    waiting_orders = (
        lineitem.key_by("l_orderkey")
        .agg(
            F.countDistinct("l_suppkey").alias("suppliers"),
            F.countDistinct(F.when(F.col("late"), F.col("l_suppkey"))).alias("late_suppliers"),
        )
        .filter((F.col("suppliers") > 1) & (F.col("late_suppliers") == 1))
        .select("l_orderkey")
    )
    orders = (
        table(env, data_dir, "orders").filter(F.col("o_orderstatus") == "F").select("o_orderkey")
    )
    nation = (
        table(env, data_dir, "nation")
        .filter(F.col("n_name") == "SAUDI ARABIA")
        .select("n_nationkey")
    )
    supplier = (
        table(env, data_dir, "supplier")
        .join(nation, left_on=["s_nationkey"], right_on=["n_nationkey"], how="semi")
        .select("s_suppkey", "s_name")
    )
    return (
        lineitem.filter(F.col("late"))
        .join(waiting_orders, on="l_orderkey", how="semi")
        .join(orders, left_on=["l_orderkey"], right_on=["o_orderkey"], how="semi")
        .join(supplier, left_on=["l_suppkey"], right_on=["s_suppkey"])
        .key_by("s_name")
        .agg(F.count("*").alias("numwait"))
        .sort(F.col("numwait").desc(), "s_name")
        .limit(100)
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q21: suppliers who kept orders waiting", argv)


if __name__ == "__main__":
    raise SystemExit(main())
