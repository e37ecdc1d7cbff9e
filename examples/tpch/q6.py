"""TPC-H Q6: forecasting revenue change (one global aggregate).

    python -m examples.tpch.q6 --data data
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
    # DATE = 1994-01-01, DISCOUNT = 0.06, QUANTITY = 24
    return (
        table(env, data_dir, "lineitem")
        .filter(
            (F.col("l_shipdate") >= date("1994-01-01"))
            & (F.col("l_shipdate") < date("1995-01-01"))
            & F.col("l_discount").between(dec("0.05"), dec("0.07"))
            & (F.col("l_quantity") < dec("24"))
        )
        .select((F.col("l_extendedprice") * F.col("l_discount")).alias("rev"))
        .agg(F.sum("rev").alias("revenue"))
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q6: forecasting revenue change", argv)


if __name__ == "__main__":
    raise SystemExit(main())
