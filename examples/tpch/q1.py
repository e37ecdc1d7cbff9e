"""TPC-H Q1: pricing summary report.

    python -m examples.tpch.q1 --data data
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
    lineitem = table(env, data_dir, "lineitem")
    # DELTA = 90: l_shipdate <= date '1998-12-01' - interval '90' day
    return (
        lineitem.filter(F.col("l_shipdate") <= date("1998-09-02"))
        .select(
            "l_returnflag",
            "l_linestatus",
            "l_quantity",
            "l_extendedprice",
            "l_discount",
            disc_price().alias("disc_price"),
            (disc_price() * (F.lit(1) + F.col("l_tax"))).alias("charge"),
        )
        .key_by("l_returnflag", "l_linestatus")
        .agg(
            F.sum("l_quantity").alias("sum_qty"),
            F.sum("l_extendedprice").alias("sum_base_price"),
            F.sum("disc_price").alias("sum_disc_price"),
            F.sum("charge").alias("sum_charge"),
            # averages as DOUBLE (Spark's avg of a DECIMAL(15,2) rounds to 6 decimal places)
            F.avg(F.col("l_quantity").cast("double")).alias("avg_qty"),
            F.avg(F.col("l_extendedprice").cast("double")).alias("avg_price"),
            F.avg(F.col("l_discount").cast("double")).alias("avg_disc"),
            F.count(F.lit(1)).alias("count_order"),
        )
        .sort("l_returnflag", "l_linestatus")
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q1: pricing summary report", argv)


if __name__ == "__main__":
    raise SystemExit(main())
