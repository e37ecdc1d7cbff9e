"""TPC-H Q8: national market share (a nation's share of its region's volume, per year).

    python -m examples.tpch.q8 --data data
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
    # NATION = 'BRAZIL', REGION = 'AMERICA', TYPE = 'ECONOMY ANODIZED STEEL'
    region = (
        table(env, data_dir, "region").filter(F.col("r_name") == "AMERICA").select("r_regionkey")
    )
    america = (
        table(env, data_dir, "nation")
        .join(region, left_on=["n_regionkey"], right_on=["r_regionkey"], how="semi")
        .select("n_nationkey")
    )
    customer = (
        table(env, data_dir, "customer")
        .join(america, left_on=["c_nationkey"], right_on=["n_nationkey"], how="semi")
        .select("c_custkey")
    )
    orders = (
        table(env, data_dir, "orders")
        .filter(F.col("o_orderdate").between(date("1995-01-01"), date("1996-12-31")))
        .join(customer, left_on=["o_custkey"], right_on=["c_custkey"], how="semi")
        .select("o_orderkey", F.year("o_orderdate").alias("o_year"))
    )
    part = (
        table(env, data_dir, "part")
        .filter(F.col("p_type") == "ECONOMY ANODIZED STEEL")
        .select("p_partkey")
    )
    nation = table(env, data_dir, "nation").select("n_nationkey", F.col("n_name").alias("nation"))
    supplier = (
        table(env, data_dir, "supplier")
        .join(nation, left_on=["s_nationkey"], right_on=["n_nationkey"])
        .select("s_suppkey", "nation")
    )
    lineitem = table(env, data_dir, "lineitem").select(
        "l_orderkey", "l_partkey", "l_suppkey", disc_price().alias("volume")
    )
    brazil = F.when(F.col("nation") == "BRAZIL", F.col("volume")).otherwise(0)
    return (
        lineitem.join(part, left_on=["l_partkey"], right_on=["p_partkey"], how="semi")
        .join(orders, left_on=["l_orderkey"], right_on=["o_orderkey"])
        .join(supplier, left_on=["l_suppkey"], right_on=["s_suppkey"])
        .key_by("o_year")
        # a DOUBLE quotient, as the reference's (a DECIMAL one rounds to 6 decimal places)
        .agg((F.sum(brazil).cast("double") / F.sum("volume").cast("double")).alias("mkt_share"))
        .sort("o_year")
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q8: national market share", argv)


if __name__ == "__main__":
    raise SystemExit(main())
