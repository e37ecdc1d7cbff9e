"""TPC-H Q20: potential part promotion (suppliers with excess stock of forest parts).

    python -m examples.tpch.q20 --data data
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository's `examples` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from typing import Any

from pyspark.sql import functions as F

from examples.tpch._common import date, dec, run_main, table


def build(env: Any, data_dir: str) -> Any:
    # COLOR = 'forest', DATE = 1994-01-01, NATION = 'CANADA'. The correlated subquery (half the
    # quantity shipped per part and supplier) is an aggregation joined to partsupp.
    forest = (
        table(env, data_dir, "part").filter(F.col("p_name").like("forest%")).select("p_partkey")
    )
    shipped = (
        table(env, data_dir, "lineitem")
        .filter(
            (F.col("l_shipdate") >= date("1994-01-01")) & (F.col("l_shipdate") < date("1995-01-01"))
        )
        .key_by("l_partkey", "l_suppkey")
        .agg(F.sum("l_quantity").alias("sum_qty"))
    )
    excess = (
        table(env, data_dir, "partsupp")
        .select("ps_partkey", "ps_suppkey", "ps_availqty")
        .join(forest, left_on=["ps_partkey"], right_on=["p_partkey"], how="semi")
        .join(shipped, left_on=["ps_partkey", "ps_suppkey"], right_on=["l_partkey", "l_suppkey"])
        .filter(F.col("ps_availqty") > dec("0.5") * F.col("sum_qty"))
        .select("ps_suppkey")
    )
    nation = (
        table(env, data_dir, "nation").filter(F.col("n_name") == "CANADA").select("n_nationkey")
    )
    return (
        table(env, data_dir, "supplier")
        .select("s_suppkey", "s_name", "s_address", "s_nationkey")
        .join(nation, left_on=["s_nationkey"], right_on=["n_nationkey"], how="semi")
        .join(excess, left_on=["s_suppkey"], right_on=["ps_suppkey"], how="semi")
        .select("s_name", "s_address")
        .sort("s_name")
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q20: potential part promotion", argv)


if __name__ == "__main__":
    raise SystemExit(main())
