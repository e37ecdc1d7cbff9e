"""TPC-H Q17: small-quantity-order revenue (yearly loss without small orders of a part).

    python -m examples.tpch.q17 --data data
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
    # BRAND = 'Brand#23', CONTAINER = 'MED BOX'. The correlated subquery (the part's average
    # quantity) is a per-part average joined back.
    part = (
        table(env, data_dir, "part")
        .filter((F.col("p_brand") == "Brand#23") & (F.col("p_container") == "MED BOX"))
        .select("p_partkey")
    )
    lineitem = (
        table(env, data_dir, "lineitem")
        .select("l_partkey", "l_quantity", "l_extendedprice")
        .join(part, left_on=["l_partkey"], right_on=["p_partkey"], how="semi")
    )
    avg_qty = lineitem.key_by("l_partkey").agg(F.avg("l_quantity").alias("avg_qty"))
    return (
        lineitem.join(avg_qty, on="l_partkey")
        .filter(F.col("l_quantity") < dec("0.2") * F.col("avg_qty"))
        .agg((F.sum("l_extendedprice") / 7.0).alias("avg_yearly"))
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q17: small-quantity-order revenue", argv)


if __name__ == "__main__":
    raise SystemExit(main())
