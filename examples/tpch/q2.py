"""TPC-H Q2: minimum cost supplier (European suppliers of brass parts at the lowest cost).

    python -m examples.tpch.q2 --data data
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
    # SIZE = 15, TYPE = 'BRASS', REGION = 'EUROPE'. The correlated subquery (the lowest supply
    # cost of the part in the region) is a per-part minimum joined back on (part, cost).
    region = (
        table(env, data_dir, "region").filter(F.col("r_name") == "EUROPE").select("r_regionkey")
    )
    nation = (
        table(env, data_dir, "nation")
        .join(region, left_on=["n_regionkey"], right_on=["r_regionkey"], how="semi")
        .select("n_nationkey", "n_name")
    )
    supplier = (
        table(env, data_dir, "supplier")
        .join(nation, left_on=["s_nationkey"], right_on=["n_nationkey"])
        .select("s_suppkey", "s_acctbal", "s_name", "n_name", "s_address", "s_phone", "s_comment")
    )
    part = (
        table(env, data_dir, "part")
        .filter((F.col("p_size") == 15) & F.col("p_type").like("%BRASS"))
        .select("p_partkey", "p_mfgr")
    )
    offers = (
        table(env, data_dir, "partsupp")
        .select("ps_partkey", "ps_suppkey", "ps_supplycost")
        .join(part, left_on=["ps_partkey"], right_on=["p_partkey"])
        .join(supplier, left_on=["ps_suppkey"], right_on=["s_suppkey"])
    )
    min_cost = offers.key_by("ps_partkey").agg(F.min("ps_supplycost").alias("ps_supplycost"))
    return (
        offers.join(min_cost, on=["ps_partkey", "ps_supplycost"], how="semi")
        .select(
            "s_acctbal", "s_name", "n_name", "p_partkey", "p_mfgr", "s_address", "s_phone",
            "s_comment",
        )
        .sort(F.col("s_acctbal").desc(), "n_name", "s_name", "p_partkey")
        .limit(100)
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q2: minimum cost supplier", argv)


if __name__ == "__main__":
    raise SystemExit(main())
