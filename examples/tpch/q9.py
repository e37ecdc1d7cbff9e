"""TPC-H Q9: product type profit measure (profit on green parts, per nation and year).

    python -m examples.tpch.q9 --data data
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository's `examples` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from typing import Any

from pyspark.sql import functions as F

from examples.tpch._common import disc_price, run_main, table


def build(env: Any, data_dir: str) -> Any:
    # COLOR = 'green'
    part = table(env, data_dir, "part").filter(F.col("p_name").like("%green%")).select("p_partkey")
    partsupp = table(env, data_dir, "partsupp").select("ps_partkey", "ps_suppkey", "ps_supplycost")
    nation = table(env, data_dir, "nation").select("n_nationkey", F.col("n_name").alias("nation"))
    supplier = (
        table(env, data_dir, "supplier")
        .join(nation, left_on=["s_nationkey"], right_on=["n_nationkey"])
        .select("s_suppkey", "nation")
    )
    orders = table(env, data_dir, "orders").select(
        "o_orderkey", F.year("o_orderdate").alias("o_year")
    )
    lineitem = table(env, data_dir, "lineitem").select(
        "l_orderkey", "l_partkey", "l_suppkey", "l_quantity", "l_extendedprice", "l_discount"
    )
    amount = disc_price() - F.col("ps_supplycost") * F.col("l_quantity")
    return (
        lineitem.join(part, left_on=["l_partkey"], right_on=["p_partkey"], how="semi")
        .join(partsupp, left_on=["l_partkey", "l_suppkey"], right_on=["ps_partkey", "ps_suppkey"])
        .join(supplier, left_on=["l_suppkey"], right_on=["s_suppkey"])
        .join(orders, left_on=["l_orderkey"], right_on=["o_orderkey"])
        .select("nation", "o_year", amount.alias("amount"))
        .key_by("nation", "o_year")
        .agg(F.sum("amount").alias("sum_profit"))
        .sort("nation", F.col("o_year").desc())
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q9: product type profit measure", argv)


if __name__ == "__main__":
    raise SystemExit(main())
