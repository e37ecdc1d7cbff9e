"""TPC-H Q16: parts/supplier relationship (suppliers per brand, type and size).

    python -m examples.tpch.q16 --data data
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
    # BRAND = 'Brand#45', TYPE = 'MEDIUM POLISHED', SIZE1..8 = 49, 14, 23, 45, 19, 3, 36, 9.
    # NOT IN (suppliers with complaints) is an anti join (s_suppkey is never NULL).
    complaints = (
        table(env, data_dir, "supplier")
        .filter(F.col("s_comment").like("%Customer%Complaints%"))
        .select("s_suppkey")
    )
    part = (
        table(env, data_dir, "part")
        .filter(
            (F.col("p_brand") != "Brand#45")
            & ~F.col("p_type").like("MEDIUM POLISHED%")
            & F.col("p_size").isin(49, 14, 23, 45, 19, 3, 36, 9)
        )
        .select("p_partkey", "p_brand", "p_type", "p_size")
    )
    return (
        table(env, data_dir, "partsupp")
        .select("ps_partkey", "ps_suppkey")
        .join(complaints, left_on=["ps_suppkey"], right_on=["s_suppkey"], how="anti")
        .join(part, left_on=["ps_partkey"], right_on=["p_partkey"])
        .key_by("p_brand", "p_type", "p_size")
        .agg(F.countDistinct("ps_suppkey").alias("supplier_cnt"))
        .sort(F.col("supplier_cnt").desc(), "p_brand", "p_type", "p_size")
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q16: parts/supplier relationship", argv)


if __name__ == "__main__":
    raise SystemExit(main())
