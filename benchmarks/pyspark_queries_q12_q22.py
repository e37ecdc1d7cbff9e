"""TPC-H Q12-Q22 as plain PySpark DataFrame code (Q1-Q11: ``benchmarks.pyspark_queries``).

Same conventions as ``benchmarks.pyspark_queries``, which merges ``QUERIES`` here into its own:
columns and ORDER BY as DuckDB's reference, the logic of the flintlock programs of
``examples/tpch``, averages and quotients over DOUBLE. Only ``pyspark`` is imported (no flintlock).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from benchmarks.pyspark_common import Paths, date, dec, revenue, table

__all__ = ["QUERIES"]


def q12(spark: Any, p: Paths) -> DataFrame:
    orders = table(spark, p, "orders")
    lineitem = table(spark, p, "lineitem").where(
        F.col("l_shipmode").isin("MAIL", "SHIP")
        & (F.col("l_commitdate") < F.col("l_receiptdate"))
        & (F.col("l_shipdate") < F.col("l_commitdate"))
        & (F.col("l_receiptdate") >= date("1994-01-01"))
        & (F.col("l_receiptdate") < date("1995-01-01"))
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


def q13(spark: Any, p: Paths) -> DataFrame:
    orders = table(spark, p, "orders").where(~F.col("o_comment").like("%special%requests%"))
    return (
        table(spark, p, "customer")
        .join(orders, F.col("c_custkey") == F.col("o_custkey"), "left")
        .groupBy("c_custkey")
        .agg(F.count("o_orderkey").alias("c_count"))
        .groupBy("c_count")
        .agg(F.count("*").alias("custdist"))
        .orderBy(F.desc("custdist"), F.desc("c_count"))
    )


def q14(spark: Any, p: Paths) -> DataFrame:
    lineitem = table(spark, p, "lineitem").where(
        (F.col("l_shipdate") >= date("1995-09-01")) & (F.col("l_shipdate") < date("1995-10-01"))
    )
    promo = F.when(F.col("p_type").startswith("PROMO"), revenue()).otherwise(0)
    return (
        lineitem.join(table(spark, p, "part"), F.col("l_partkey") == F.col("p_partkey"))
        # 100.0 makes the quotient a DOUBLE, as DuckDB's (a DECIMAL one has 6 decimal places)
        .agg((100.0 * F.sum(promo) / F.sum(revenue())).alias("promo_revenue"))
    )


def q15(spark: Any, p: Paths) -> DataFrame:
    # The view revenue0 is a per-supplier aggregate; max(total_revenue) a global one, matched by
    # a semi join on the revenue.
    revenue0 = (
        table(spark, p, "lineitem")
        .where((F.col("l_shipdate") >= date("1996-01-01"))
               & (F.col("l_shipdate") < date("1996-04-01")))
        .groupBy("l_suppkey")
        .agg(F.sum(revenue()).alias("total_revenue"))
    )
    top = revenue0.agg(F.max("total_revenue").alias("total_revenue"))
    return (
        revenue0.join(top, "total_revenue", "left_semi")
        .join(table(spark, p, "supplier"), F.col("l_suppkey") == F.col("s_suppkey"))
        .select("s_suppkey", "s_name", "s_address", "s_phone", "total_revenue")
        .orderBy("s_suppkey")
    )


def q16(spark: Any, p: Paths) -> DataFrame:
    # NOT IN (suppliers with complaints) is an anti join (s_suppkey is never NULL).
    complaints = table(spark, p, "supplier").where(
        F.col("s_comment").like("%Customer%Complaints%")
    )
    part = table(spark, p, "part").where(
        (F.col("p_brand") != "Brand#45")
        & ~F.col("p_type").startswith("MEDIUM POLISHED")
        & F.col("p_size").isin(49, 14, 23, 45, 19, 3, 36, 9)
    )
    return (
        table(spark, p, "partsupp")
        .join(complaints, F.col("ps_suppkey") == F.col("s_suppkey"), "left_anti")
        .join(part, F.col("ps_partkey") == F.col("p_partkey"))
        .groupBy("p_brand", "p_type", "p_size")
        .agg(F.countDistinct("ps_suppkey").alias("supplier_cnt"))
        .orderBy(F.desc("supplier_cnt"), "p_brand", "p_type", "p_size")
    )


def q17(spark: Any, p: Paths) -> DataFrame:
    # The correlated subquery (the part's average quantity) is a per-part average joined back.
    part = table(spark, p, "part").where(
        (F.col("p_brand") == "Brand#23") & (F.col("p_container") == "MED BOX")
    )
    lineitem = table(spark, p, "lineitem").join(
        part, F.col("l_partkey") == F.col("p_partkey"), "left_semi"
    )
    avg_qty = lineitem.groupBy("l_partkey").agg(
        F.avg(F.col("l_quantity").cast("double")).alias("avg_qty")
    )
    return (
        lineitem.join(avg_qty, "l_partkey")
        .where(F.col("l_quantity") < 0.2 * F.col("avg_qty"))
        .agg((F.sum("l_extendedprice") / 7.0).alias("avg_yearly"))
    )


def q18(spark: Any, p: Paths) -> DataFrame:
    lineitem = table(spark, p, "lineitem")
    large = (
        lineitem.groupBy("l_orderkey")
        .agg(F.sum("l_quantity").alias("qty"))
        .where(F.col("qty") > 300)
        .select(F.col("l_orderkey").alias("large_orderkey"))
    )
    return (
        table(spark, p, "customer")
        .join(table(spark, p, "orders"), F.col("c_custkey") == F.col("o_custkey"))
        .join(large, F.col("o_orderkey") == F.col("large_orderkey"), "left_semi")
        .join(lineitem, F.col("o_orderkey") == F.col("l_orderkey"))
        .groupBy("c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice")
        .agg(F.sum("l_quantity").alias("sum_qty"))
        .orderBy(F.desc("o_totalprice"), "o_orderdate", "o_orderkey")
        .limit(100)
    )


def q19(spark: Any, p: Paths) -> DataFrame:
    def bucket(brand: str, containers: tuple[str, ...], quantity: int, max_size: int) -> Any:
        return (
            (F.col("p_brand") == brand)
            & F.col("p_container").isin(*containers)
            & F.col("l_quantity").between(dec(str(quantity)), dec(str(quantity + 10)))
            & F.col("p_size").between(1, max_size)
        )

    lineitem = table(spark, p, "lineitem").where(
        F.col("l_shipmode").isin("AIR", "AIR REG")
        & (F.col("l_shipinstruct") == "DELIVER IN PERSON")
    )
    return (
        lineitem.join(table(spark, p, "part"), F.col("l_partkey") == F.col("p_partkey"))
        .where(
            bucket("Brand#12", ("SM CASE", "SM BOX", "SM PACK", "SM PKG"), 1, 5)
            | bucket("Brand#23", ("MED BAG", "MED BOX", "MED PKG", "MED PACK"), 10, 10)
            | bucket("Brand#34", ("LG CASE", "LG BOX", "LG PACK", "LG PKG"), 20, 15)
        )
        .agg(F.sum(revenue()).alias("revenue"))
    )


def q20(spark: Any, p: Paths) -> DataFrame:
    # The correlated subquery (half the quantity shipped per part and supplier) is an
    # aggregation joined to partsupp.
    forest = table(spark, p, "part").where(F.col("p_name").startswith("forest"))
    shipped = (
        table(spark, p, "lineitem")
        .where((F.col("l_shipdate") >= date("1994-01-01"))
               & (F.col("l_shipdate") < date("1995-01-01")))
        .groupBy("l_partkey", "l_suppkey")
        .agg(F.sum("l_quantity").alias("sum_qty"))
    )
    excess = (
        table(spark, p, "partsupp")
        .join(forest, F.col("ps_partkey") == F.col("p_partkey"), "left_semi")
        .join(shipped, (F.col("ps_partkey") == F.col("l_partkey"))
              & (F.col("ps_suppkey") == F.col("l_suppkey")))
        .where(F.col("ps_availqty") > dec("0.5") * F.col("sum_qty"))
    )
    nation = table(spark, p, "nation").where(F.col("n_name") == "CANADA")
    return (
        table(spark, p, "supplier")
        .join(nation, F.col("s_nationkey") == F.col("n_nationkey"), "left_semi")
        .join(excess, F.col("s_suppkey") == F.col("ps_suppkey"), "left_semi")
        .select("s_name", "s_address")
        .orderBy("s_name")
    )


def q21(spark: Any, p: Paths) -> DataFrame:
    # EXISTS (another supplier in the order) and NOT EXISTS (another late supplier in the order)
    # from per-order counts of distinct suppliers: a late line qualifies when its order has more
    # than one supplier and exactly one late supplier (its own).
    lineitem = table(spark, p, "lineitem").withColumn(
        "late", F.col("l_receiptdate") > F.col("l_commitdate")
    )
    waiting_orders = (
        lineitem.groupBy("l_orderkey")
        .agg(F.countDistinct("l_suppkey").alias("suppliers"),
             F.countDistinct(F.when(F.col("late"), F.col("l_suppkey"))).alias("late_suppliers"))
        .where((F.col("suppliers") > 1) & (F.col("late_suppliers") == 1))
    )
    orders = table(spark, p, "orders").where(F.col("o_orderstatus") == "F")
    nation = table(spark, p, "nation").where(F.col("n_name") == "SAUDI ARABIA")
    supplier = table(spark, p, "supplier").join(
        nation, F.col("s_nationkey") == F.col("n_nationkey"), "left_semi"
    )
    return (
        lineitem.where(F.col("late"))
        .join(waiting_orders, "l_orderkey", "left_semi")
        .join(orders, F.col("l_orderkey") == F.col("o_orderkey"), "left_semi")
        .join(supplier, F.col("l_suppkey") == F.col("s_suppkey"))
        .groupBy("s_name")
        .agg(F.count("*").alias("numwait"))
        .orderBy(F.desc("numwait"), "s_name")
        .limit(100)
    )


def q22(spark: Any, p: Paths) -> DataFrame:
    # The subquery (the average positive balance) is a global aggregate, crossed with the
    # customers; NOT EXISTS is an anti join.
    customer = (
        table(spark, p, "customer")
        .withColumn("cntrycode", F.substring("c_phone", 1, 2))
        .where(F.col("cntrycode").isin("13", "31", "23", "29", "30", "18", "17"))
    )
    avg_acctbal = customer.where(F.col("c_acctbal") > dec("0.00")).agg(
        F.avg(F.col("c_acctbal").cast("double")).alias("avg_acctbal")
    )
    return (
        customer.join(table(spark, p, "orders"), F.col("c_custkey") == F.col("o_custkey"),
                      "left_anti")
        .crossJoin(avg_acctbal)
        .where(F.col("c_acctbal") > F.col("avg_acctbal"))
        .groupBy("cntrycode")
        .agg(F.count("*").alias("numcust"), F.sum("c_acctbal").alias("totacctbal"))
        .orderBy("cntrycode")
    )


QUERIES: dict[str, Callable[[Any, Paths], DataFrame]] = {
    "q12": q12, "q13": q13, "q14": q14, "q15": q15, "q16": q16, "q17": q17, "q18": q18,
    "q19": q19, "q20": q20, "q21": q21, "q22": q22,
}
