"""TPC-H Q7: volume shipping (revenue between two nations, per year).

    python -m examples.tpch.q7 --data data
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
    # NATION1 = 'FRANCE', NATION2 = 'GERMANY'
    nation = (
        table(env, data_dir, "nation")
        .filter(F.col("n_name").isin("FRANCE", "GERMANY"))
        .select("n_nationkey", "n_name")
    )
    supplier = (
        table(env, data_dir, "supplier")
        .join(nation, left_on=["s_nationkey"], right_on=["n_nationkey"])
        .select("s_suppkey", F.col("n_name").alias("supp_nation"))
    )
    customer = (
        table(env, data_dir, "customer")
        .join(nation, left_on=["c_nationkey"], right_on=["n_nationkey"])
        .select("c_custkey", F.col("n_name").alias("cust_nation"))
    )
    orders = (
        table(env, data_dir, "orders")
        .select("o_orderkey", "o_custkey")
        .join(customer, left_on=["o_custkey"], right_on=["c_custkey"])
        .select("o_orderkey", "cust_nation")
    )
    lineitem = (
        table(env, data_dir, "lineitem")
        .filter(F.col("l_shipdate").between(date("1995-01-01"), date("1996-12-31")))
        .select(
            "l_orderkey", "l_suppkey", F.year("l_shipdate").alias("l_year"),
            disc_price().alias("volume"),
        )
    )
    france_germany = (F.col("supp_nation") == "FRANCE") & (F.col("cust_nation") == "GERMANY")
    germany_france = (F.col("supp_nation") == "GERMANY") & (F.col("cust_nation") == "FRANCE")
    return (
        lineitem.join(supplier, left_on=["l_suppkey"], right_on=["s_suppkey"])
        .join(orders, left_on=["l_orderkey"], right_on=["o_orderkey"])
        .filter(france_germany | germany_france)
        .key_by("supp_nation", "cust_nation", "l_year")
        .agg(F.sum("volume").alias("revenue"))
        .sort("supp_nation", "cust_nation", "l_year")
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q7: volume shipping", argv)


if __name__ == "__main__":
    raise SystemExit(main())
