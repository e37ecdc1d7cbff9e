"""TPC-H Q19: discounted revenue (three brand, container and quantity ranges).

    python -m examples.tpch.q19 --data data
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository's `examples` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from typing import Any

from pyspark.sql import functions as F

from examples.tpch._common import dec, disc_price, run_main, table


def _bucket(brand: str, containers: tuple[str, ...], quantity: int, max_size: int) -> Any:
    """One of the query's three OR-ed conditions on the joined part and line item."""
    return (
        (F.col("p_brand") == brand)
        & F.col("p_container").isin(*containers)
        & F.col("l_quantity").between(dec(str(quantity)), dec(str(quantity + 10)))
        & F.col("p_size").between(1, max_size)
    )


def build(env: Any, data_dir: str) -> Any:
    # QUANTITY1..3 = 1, 10, 20; BRAND1..3 = 'Brand#12', 'Brand#23', 'Brand#34'
    lineitem = (
        table(env, data_dir, "lineitem")
        .filter(
            F.col("l_shipmode").isin("AIR", "AIR REG")
            & (F.col("l_shipinstruct") == "DELIVER IN PERSON")
        )
        .select("l_partkey", "l_quantity", disc_price().alias("volume"))
    )
    part = table(env, data_dir, "part").select("p_partkey", "p_brand", "p_container", "p_size")
    return (
        lineitem.join(part, left_on=["l_partkey"], right_on=["p_partkey"])
        .filter(
            _bucket("Brand#12", ("SM CASE", "SM BOX", "SM PACK", "SM PKG"), 1, 5)
            | _bucket("Brand#23", ("MED BAG", "MED BOX", "MED PKG", "MED PACK"), 10, 10)
            | _bucket("Brand#34", ("LG CASE", "LG BOX", "LG PACK", "LG PKG"), 20, 15)
        )
        .agg(F.sum("volume").alias("revenue"))
    )


def main(argv: list[str] | None = None) -> int:
    return run_main(build, "TPC-H Q19: discounted revenue", argv)


if __name__ == "__main__":
    raise SystemExit(main())
