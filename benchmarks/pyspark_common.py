"""What the plain-PySpark workloads share: input paths, table readers and literal helpers.

Only ``pyspark`` is imported here (as in ``benchmarks.pyspark_queries``): the module runs in a plain
PySpark process, classic or Connect, and never imports flintlock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

__all__ = ["Paths", "date", "dec", "revenue", "table"]


@dataclass(frozen=True)
class Paths:
    """Where a workload's input lives (absolute paths)."""

    tpch: str
    text: str
    flights: str


def date(s: str) -> Any:
    """A DATE literal."""
    return F.lit(s).cast("date")


def dec(s: str) -> Any:
    """A DECIMAL literal, DECIMAL(15,2) like TPC-H's money columns or with more places when ``s``
    has them (``dec("0.0001")`` is DECIMAL(15,4)), so comparisons with DECIMAL columns stay
    exact."""
    scale = max(2, len(s.partition(".")[2]))
    return F.lit(s).cast(f"decimal(15,{scale})")


def revenue() -> Any:
    """``l_extendedprice * (1 - l_discount)``."""
    return F.col("l_extendedprice") * (1 - F.col("l_discount"))


def table(spark: Any, p: Paths, name: str) -> DataFrame:
    """TPC-H table ``name`` (a directory of Parquet files)."""
    return spark.read.parquet(f"{p.tpch}/{name}")
