"""TPC-H Q22: global sales opportunity (rich customers without orders, per country code).

    python -m examples.tpch.q22 --data data
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
    # I1..I7 = '13', '31', '23', '29', '30', '18', '17'. The subquery (the average positive
    # balance) is a global aggregate, crossed with the customers; NOT EXISTS is an anti join.
    customer = (
        table(env, data_dir, "customer")
        .select("c_custkey", "c_acctbal", F.substring("c_phone", 1, 2).alias("cntrycode"))
        .filter(F.col("cntrycode").isin("13", "31", "23", "29", "30", "18", "17"))
    )
    avg_acctbal = (
        customer.filter(F.col("c_acctbal") > dec("0.00"))
        .agg(F.avg("c_acctbal").alias("avg_acctbal"))
    )
    orders = table(env, data_dir, "orders").select("o_custkey")
    return (
        customer.join(orders, left_on=["c_custkey"], right_on=["o_custkey"], how="anti")
        .cross_join(avg_acctbal)
        .filter(F.col("c_acctbal") > F.col("avg_acctbal"))
        .key_by("cntrycode")
        .agg(F.count("*").alias("numcust"), F.sum("c_acctbal").alias("totacctbal"))
        .sort("cntrycode")
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q22: global sales opportunity", argv)


if __name__ == "__main__":
    raise SystemExit(main())
