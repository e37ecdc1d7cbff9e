"""TPC-H Q15: top supplier (the suppliers with the highest revenue in a quarter).

    python -m examples.tpch.q15 --data data
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
    # DATE = 1996-01-01 (three months). The view revenue0 is a per-supplier aggregate; the
    # subquery max(total_revenue) a global one, matched by a semi join on the revenue.
    revenue = (
        table(env, data_dir, "lineitem")
        .filter(
            (F.col("l_shipdate") >= date("1996-01-01")) & (F.col("l_shipdate") < date("1996-04-01"))
        )
        .select("l_suppkey", disc_price().alias("volume"))
        .key_by("l_suppkey")
        .agg(F.sum("volume").alias("total_revenue"))
    )
    top = revenue.agg(F.max("total_revenue").alias("total_revenue"))
    supplier = table(env, data_dir, "supplier").select(
        "s_suppkey", "s_name", "s_address", "s_phone"
    )
    return (
        revenue.join(top, on="total_revenue", how="semi")
        .join(supplier, left_on=["l_suppkey"], right_on=["s_suppkey"])
        .select("s_suppkey", "s_name", "s_address", "s_phone", "total_revenue")
        .sort("s_suppkey")
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q15: top supplier", argv)


if __name__ == "__main__":
    raise SystemExit(main())
