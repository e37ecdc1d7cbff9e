"""The benchmark workloads as plain PySpark, written as a PySpark user would (DataFrame API).

Each ``QUERIES[name](spark, paths)`` returns a DataFrame whose columns and ORDER BY match the DuckDB
reference (``benchmarks.workloads``); the caller collects it. ``paths`` is a ``Paths`` with the
TPC-H directory (``<tpch>/<table>/*.parquet``), the text directory (``*.txt``) and the nycflights13
directory (``flights/``, ``airlines/``). Averages are taken over DOUBLE, as DuckDB's ``avg``
(Spark's ``avg`` of a DECIMAL(15,2) rounds to 6 decimal places), and so are the quotients of Q8
and Q14.

The 22 TPC-H queries follow the logic of the flintlock programs of ``examples/tpch`` (correlated
subqueries as aggregates joined back, EXISTS / IN as ``left_semi`` joins, NOT EXISTS / NOT IN as
``left_anti`` joins, global subquery aggregates by ``crossJoin``), so every system does the same
work. Q1-Q11 live here, Q12-Q22 in ``benchmarks.pyspark_queries_q12_q22``; the shared helpers in
``benchmarks.pyspark_common``.

Only ``pyspark`` (and these sibling modules) is imported here, so the module runs in a plain
PySpark process (classic or Connect); it never imports flintlock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from benchmarks import pyspark_queries_q12_q22 as _late
from benchmarks.pyspark_common import Paths, date, dec, revenue, table

__all__ = ["QUERIES", "Paths"]

WORD_SPLIT = "[^a-z']+"


def q1(spark: Any, p: Paths) -> DataFrame:
    return (
        table(spark, p, "lineitem")
        .where(F.col("l_shipdate") <= date("1998-09-02"))
        .groupBy("l_returnflag", "l_linestatus")
        .agg(
            F.sum("l_quantity").alias("sum_qty"),
            F.sum("l_extendedprice").alias("sum_base_price"),
            F.sum(revenue()).alias("sum_disc_price"),
            F.sum(revenue() * (1 + F.col("l_tax"))).alias("sum_charge"),
            F.avg(F.col("l_quantity").cast("double")).alias("avg_qty"),
            F.avg(F.col("l_extendedprice").cast("double")).alias("avg_price"),
            F.avg(F.col("l_discount").cast("double")).alias("avg_disc"),
            F.count("*").alias("count_order"),
        )
        .orderBy("l_returnflag", "l_linestatus")
    )


def q2(spark: Any, p: Paths) -> DataFrame:
    # The correlated subquery (the part's lowest supply cost in the region) is a per-part minimum
    # joined back on (part, cost).
    region = table(spark, p, "region").where(F.col("r_name") == "EUROPE")
    nation = (
        table(spark, p, "nation")
        .join(region, F.col("n_regionkey") == F.col("r_regionkey"), "left_semi")
        .select("n_nationkey", "n_name")
    )
    supplier = table(spark, p, "supplier").join(
        nation, F.col("s_nationkey") == F.col("n_nationkey")
    )
    part = table(spark, p, "part").where(
        (F.col("p_size") == 15) & F.col("p_type").endswith("BRASS")
    )
    offers = (
        table(spark, p, "partsupp")
        .join(part, F.col("ps_partkey") == F.col("p_partkey"))
        .join(supplier, F.col("ps_suppkey") == F.col("s_suppkey"))
    )
    min_cost = offers.groupBy("ps_partkey").agg(F.min("ps_supplycost").alias("ps_supplycost"))
    return (
        offers.join(min_cost, ["ps_partkey", "ps_supplycost"], "left_semi")
        .select("s_acctbal", "s_name", "n_name", "p_partkey", "p_mfgr", "s_address", "s_phone",
                "s_comment")
        .orderBy(F.desc("s_acctbal"), "n_name", "s_name", "p_partkey")
        .limit(100)
    )


def q3(spark: Any, p: Paths) -> DataFrame:
    customer = table(spark, p, "customer").where(F.col("c_mktsegment") == "BUILDING")
    orders = table(spark, p, "orders").where(F.col("o_orderdate") < date("1995-03-15"))
    lineitem = table(spark, p, "lineitem").where(F.col("l_shipdate") > date("1995-03-15"))
    return (
        customer.join(orders, customer.c_custkey == orders.o_custkey)
        .join(lineitem, F.col("o_orderkey") == F.col("l_orderkey"))
        .groupBy("l_orderkey", "o_orderdate", "o_shippriority")
        .agg(F.sum(revenue()).alias("revenue"))
        .select("l_orderkey", "revenue", "o_orderdate", "o_shippriority")
        .orderBy(F.desc("revenue"), "o_orderdate")
        .limit(10)
    )


def q4(spark: Any, p: Paths) -> DataFrame:
    orders = table(spark, p, "orders").where(
        (F.col("o_orderdate") >= date("1993-07-01")) & (F.col("o_orderdate") < date("1993-10-01"))
    )
    late = table(spark, p, "lineitem").where(F.col("l_commitdate") < F.col("l_receiptdate"))
    return (
        orders.join(late, F.col("o_orderkey") == F.col("l_orderkey"), "left_semi")
        .groupBy("o_orderpriority")
        .agg(F.count("*").alias("order_count"))
        .orderBy("o_orderpriority")
    )


def q5(spark: Any, p: Paths) -> DataFrame:
    region = table(spark, p, "region").where(F.col("r_name") == "ASIA")
    nation = table(spark, p, "nation")
    supplier = table(spark, p, "supplier")
    customer = table(spark, p, "customer")
    orders = table(spark, p, "orders").where(
        (F.col("o_orderdate") >= date("1994-01-01")) & (F.col("o_orderdate") < date("1995-01-01"))
    )
    lineitem = table(spark, p, "lineitem")
    return (
        region.join(nation, F.col("r_regionkey") == F.col("n_regionkey"))
        .join(supplier, F.col("n_nationkey") == F.col("s_nationkey"))
        .join(lineitem, F.col("s_suppkey") == F.col("l_suppkey"))
        .join(orders, F.col("l_orderkey") == F.col("o_orderkey"))
        .join(customer, (F.col("o_custkey") == F.col("c_custkey"))
              & (F.col("c_nationkey") == F.col("s_nationkey")))
        .groupBy("n_name")
        .agg(F.sum(revenue()).alias("revenue"))
        .orderBy(F.desc("revenue"))
    )


def q6(spark: Any, p: Paths) -> DataFrame:
    return (
        table(spark, p, "lineitem")
        .where(
            (F.col("l_shipdate") >= date("1994-01-01"))
            & (F.col("l_shipdate") < date("1995-01-01"))
            & F.col("l_discount").between(dec("0.05"), dec("0.07"))
            & (F.col("l_quantity") < 24)
        )
        .agg(F.sum(F.col("l_extendedprice") * F.col("l_discount")).alias("revenue"))
    )


def q7(spark: Any, p: Paths) -> DataFrame:
    nation = table(spark, p, "nation").where(F.col("n_name").isin("FRANCE", "GERMANY"))
    supplier = table(spark, p, "supplier").join(
        nation.select("n_nationkey", F.col("n_name").alias("supp_nation")),
        F.col("s_nationkey") == F.col("n_nationkey"),
    ).select("s_suppkey", "supp_nation")
    customer = table(spark, p, "customer").join(
        nation.select("n_nationkey", F.col("n_name").alias("cust_nation")),
        F.col("c_nationkey") == F.col("n_nationkey"),
    ).select("c_custkey", "cust_nation")
    orders = table(spark, p, "orders").join(customer, F.col("o_custkey") == F.col("c_custkey"))
    lineitem = table(spark, p, "lineitem").where(
        F.col("l_shipdate").between(date("1995-01-01"), date("1996-12-31"))
    )
    return (
        lineitem.join(supplier, F.col("l_suppkey") == F.col("s_suppkey"))
        .join(orders, F.col("l_orderkey") == F.col("o_orderkey"))
        .where(((F.col("supp_nation") == "FRANCE") & (F.col("cust_nation") == "GERMANY"))
               | ((F.col("supp_nation") == "GERMANY") & (F.col("cust_nation") == "FRANCE")))
        .groupBy("supp_nation", "cust_nation", F.year("l_shipdate").alias("l_year"))
        .agg(F.sum(revenue()).alias("revenue"))
        .orderBy("supp_nation", "cust_nation", "l_year")
    )


def q8(spark: Any, p: Paths) -> DataFrame:
    region = table(spark, p, "region").where(F.col("r_name") == "AMERICA")
    america = table(spark, p, "nation").join(
        region, F.col("n_regionkey") == F.col("r_regionkey"), "left_semi"
    )
    customer = table(spark, p, "customer").join(
        america, F.col("c_nationkey") == F.col("n_nationkey"), "left_semi"
    )
    orders = (
        table(spark, p, "orders")
        .where(F.col("o_orderdate").between(date("1995-01-01"), date("1996-12-31")))
        .join(customer, F.col("o_custkey") == F.col("c_custkey"), "left_semi")
    )
    part = table(spark, p, "part").where(F.col("p_type") == "ECONOMY ANODIZED STEEL")
    supplier = table(spark, p, "supplier").join(
        table(spark, p, "nation").select("n_nationkey", F.col("n_name").alias("nation")),
        F.col("s_nationkey") == F.col("n_nationkey"),
    )
    brazil = F.when(F.col("nation") == "BRAZIL", revenue()).otherwise(0)
    return (
        table(spark, p, "lineitem")
        .join(part, F.col("l_partkey") == F.col("p_partkey"), "left_semi")
        .join(orders, F.col("l_orderkey") == F.col("o_orderkey"))
        .join(supplier, F.col("l_suppkey") == F.col("s_suppkey"))
        .groupBy(F.year("o_orderdate").alias("o_year"))
        .agg((F.sum(brazil).cast("double") / F.sum(revenue()).cast("double")).alias("mkt_share"))
        .orderBy("o_year")
    )


def q9(spark: Any, p: Paths) -> DataFrame:
    part = table(spark, p, "part").where(F.col("p_name").contains("green"))
    supplier = table(spark, p, "supplier").join(
        table(spark, p, "nation").select("n_nationkey", F.col("n_name").alias("nation")),
        F.col("s_nationkey") == F.col("n_nationkey"),
    )
    partsupp = table(spark, p, "partsupp")
    amount = revenue() - F.col("ps_supplycost") * F.col("l_quantity")
    return (
        table(spark, p, "lineitem")
        .join(part, F.col("l_partkey") == F.col("p_partkey"), "left_semi")
        .join(partsupp, (F.col("l_partkey") == F.col("ps_partkey"))
              & (F.col("l_suppkey") == F.col("ps_suppkey")))
        .join(supplier, F.col("l_suppkey") == F.col("s_suppkey"))
        .join(table(spark, p, "orders"), F.col("l_orderkey") == F.col("o_orderkey"))
        .groupBy("nation", F.year("o_orderdate").alias("o_year"))
        .agg(F.sum(amount).alias("sum_profit"))
        .orderBy("nation", F.desc("o_year"))
    )


def q10(spark: Any, p: Paths) -> DataFrame:
    customer = table(spark, p, "customer")
    orders = table(spark, p, "orders").where(
        (F.col("o_orderdate") >= date("1993-10-01")) & (F.col("o_orderdate") < date("1994-01-01"))
    )
    lineitem = table(spark, p, "lineitem").where(F.col("l_returnflag") == "R")
    nation = table(spark, p, "nation")
    return (
        customer.join(orders, F.col("c_custkey") == F.col("o_custkey"))
        .join(lineitem, F.col("o_orderkey") == F.col("l_orderkey"))
        .join(nation, F.col("c_nationkey") == F.col("n_nationkey"))
        .groupBy("c_custkey", "c_name", "c_acctbal", "c_phone", "n_name", "c_address", "c_comment")
        .agg(F.sum(revenue()).alias("revenue"))
        .select("c_custkey", "c_name", "revenue", "c_acctbal", "n_name", "c_address", "c_phone",
                "c_comment")
        .orderBy(F.desc("revenue"), "c_custkey")
        .limit(20)
    )


def q11(spark: Any, p: Paths) -> DataFrame:
    # The HAVING subquery (a fraction of the nation's whole stock value) is a global aggregate,
    # crossed with the per-part values.
    nation = table(spark, p, "nation").where(F.col("n_name") == "GERMANY")
    supplier = table(spark, p, "supplier").join(
        nation, F.col("s_nationkey") == F.col("n_nationkey"), "left_semi"
    )
    stock = (
        table(spark, p, "partsupp")
        .join(supplier, F.col("ps_suppkey") == F.col("s_suppkey"), "left_semi")
        .select("ps_partkey", (F.col("ps_supplycost") * F.col("ps_availqty")).alias("value"))
    )
    threshold = stock.agg((F.sum("value") * dec("0.0001")).alias("threshold"))
    return (
        stock.groupBy("ps_partkey")
        .agg(F.sum("value").alias("value"))
        .crossJoin(threshold)
        .where(F.col("value") > F.col("threshold"))
        .select("ps_partkey", "value")
        .orderBy(F.desc("value"))
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
    "q1": q1, "q2": q2, "q3": q3, "q4": q4, "q5": q5, "q6": q6, "q7": q7, "q8": q8, "q9": q9,
    "q10": q10, "q11": q11, **_late.QUERIES,
    "word_count": word_count, "flights": flights,
}
