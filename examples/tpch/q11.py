"""TPC-H Q11: important stock identification (parts with a significant share of a nation's stock).

    python -m examples.tpch.q11 --data data
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
    # NATION = 'GERMANY', FRACTION = 0.0001. The HAVING subquery (a fraction of the nation's
    # whole stock value) is a global aggregate, crossed with the per-part values.
    nation = (
        table(env, data_dir, "nation").filter(F.col("n_name") == "GERMANY").select("n_nationkey")
    )
    supplier = (
        table(env, data_dir, "supplier")
        .join(nation, left_on=["s_nationkey"], right_on=["n_nationkey"], how="semi")
        .select("s_suppkey")
    )
    stock = (
        table(env, data_dir, "partsupp")
        .join(supplier, left_on=["ps_suppkey"], right_on=["s_suppkey"], how="semi")
        .select("ps_partkey", (F.col("ps_supplycost") * F.col("ps_availqty")).alias("value"))
    )
    threshold = stock.agg((F.sum("value") * dec("0.0001")).alias("threshold"))
    return (
        stock.key_by("ps_partkey")
        .agg(F.sum("value").alias("value"))
        .cross_join(threshold)
        .filter(F.col("value") > F.col("threshold"))
        .select("ps_partkey", "value")
        .sort(F.col("value").desc())
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q11: important stock identification", argv)


if __name__ == "__main__":
    raise SystemExit(main())
