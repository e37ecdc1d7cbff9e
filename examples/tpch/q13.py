"""TPC-H Q13: customer distribution (customers per number of orders).

    python -m examples.tpch.q13 --data data
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
    # WORD1 = 'special', WORD2 = 'requests'
    orders = (
        table(env, data_dir, "orders")
        .filter(~F.col("o_comment").like("%special%requests%"))
        .select("o_orderkey", "o_custkey")
    )
    customer = table(env, data_dir, "customer").select("c_custkey")
    return (
        customer.join(orders, left_on=["c_custkey"], right_on=["o_custkey"], how="left")
        .key_by("c_custkey")
        .agg(F.count("o_orderkey").alias("c_count"))
        .key_by("c_count")
        .agg(F.count("*").alias("custdist"))
        .sort(F.col("custdist").desc(), F.col("c_count").desc())
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q13: customer distribution", argv)


if __name__ == "__main__":
    raise SystemExit(main())
