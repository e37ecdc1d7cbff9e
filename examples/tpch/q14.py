"""TPC-H Q14: promotion effect (share of promotional parts in a month's revenue).

    python -m examples.tpch.q14 --data data
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
    # DATE = 1995-09-01 (one month)
    lineitem = (
        table(env, data_dir, "lineitem")
        .filter(
            (F.col("l_shipdate") >= date("1995-09-01")) & (F.col("l_shipdate") < date("1995-10-01"))
        )
        .select("l_partkey", disc_price().alias("volume"))
    )
    part = table(env, data_dir, "part").select("p_partkey", "p_type")
    promo = F.when(F.col("p_type").like("PROMO%"), F.col("volume")).otherwise(0)
    return (
        lineitem.join(part, left_on=["l_partkey"], right_on=["p_partkey"])
        # 100.0 makes it a DOUBLE, as the reference's (a DECIMAL quotient has 6 decimal places)
        .agg((100.0 * F.sum(promo) / F.sum("volume")).alias("promo_revenue"))
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q14: promotion effect", argv)


if __name__ == "__main__":
    raise SystemExit(main())
