"""TPC-H Q12: shipping modes and order priority.

    python -m examples.tpch.q12 --data data
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository's `examples` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from typing import Any

from pyspark.sql import functions as F

from examples.tpch._common import date, run_main, table


def build(env: Any, data_dir: str) -> Any:
    # SHIPMODE1 = 'MAIL', SHIPMODE2 = 'SHIP', DATE = 1994-01-01
    lineitem = (
        table(env, data_dir, "lineitem")
        .filter(
            F.col("l_shipmode").isin("MAIL", "SHIP")
            & (F.col("l_commitdate") < F.col("l_receiptdate"))
            & (F.col("l_shipdate") < F.col("l_commitdate"))
            & (F.col("l_receiptdate") >= date("1994-01-01"))
            & (F.col("l_receiptdate") < date("1995-01-01"))
        )
        .select("l_orderkey", "l_shipmode")
    )
    orders = table(env, data_dir, "orders").select("o_orderkey", "o_orderpriority")
    high = F.col("o_orderpriority").isin("1-URGENT", "2-HIGH")
    return (
        lineitem.join(orders, left_on=["l_orderkey"], right_on=["o_orderkey"])
        .key_by("l_shipmode")
        .agg(
            F.sum(F.when(high, 1).otherwise(0)).alias("high_line_count"),
            F.sum(F.when(high, 0).otherwise(1)).alias("low_line_count"),
        )
        .sort("l_shipmode")
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q12: shipping modes and order priority", argv)


if __name__ == "__main__":
    raise SystemExit(main())
