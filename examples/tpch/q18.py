"""TPC-H Q18: large volume customer (orders of more than 300 units).

    python -m examples.tpch.q18 --data data
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository's `examples` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from typing import Any

from pyspark.sql import functions as F

from examples.tpch._common import dec, run_main, table


def build(env: Any, data_dir: str) -> Any:
    # QUANTITY = 300. The query's final sum(l_quantity) per order equals the per-order sum of the
    # IN-subquery, so lineitem is aggregated once and joined to orders and customer.
    large_orders = (
        table(env, data_dir, "lineitem")
        .select("l_orderkey", "l_quantity")
        .key_by("l_orderkey")
        .agg(F.sum("l_quantity").alias("sum_qty"))
        .filter(F.col("sum_qty") > dec("300"))
    )
    orders = table(env, data_dir, "orders").select(
        "o_orderkey", "o_custkey", "o_orderdate", "o_totalprice"
    )
    customer = table(env, data_dir, "customer").select("c_custkey", "c_name")
    return (
        large_orders.join(orders, left_on=["l_orderkey"], right_on=["o_orderkey"])
        .join(customer, left_on=["o_custkey"], right_on=["c_custkey"])
        .select("c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice", "sum_qty")
        .sort(F.col("o_totalprice").desc(), F.col("o_orderdate"), F.col("o_orderkey"))
        .limit(100)
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q18: large volume customer", argv)


if __name__ == "__main__":
    raise SystemExit(main())
