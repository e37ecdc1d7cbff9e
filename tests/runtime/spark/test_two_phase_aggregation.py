"""Two-phase aggregation: partial columns -> Parquet -> merge columns equal one-phase Spark.

The local phase runs on several Spark partitions of the input, its rows go through Parquet (as
they do between vertices), and the merge runs on what comes back; the result must have the names,
types and values Spark's own one-phase ``groupBy().agg()`` gives.
"""

from __future__ import annotations

import decimal
import random
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from flintlock.runtime.operators import aggregation as A
from flintlock.runtime.spark.schema import ddl_field_types, struct_to_ddl

# ---- the plan (pure Python, no Spark) ------------------------------------------------------------


def test_plan_lists_every_call_and_keeps_the_output_names() -> None:
    total = F.sum("x")
    plan, why = A.plan_two_phase([
        total.alias("s"), (total / F.count("x")).alias("ratio"), F.sum(F.lit(1)).alias("one"),
        F.sum(F.lit("1")).alias("text_one"), F.avg(F.col("y").cast("double")).alias("a"),
        F.when(F.max("y") > 1, "hi").alias("w"), F.count_if(F.col("y") > 1).alias("ci"),
    ])
    assert why == ""
    assert plan is not None
    assert plan.names == ("s", "ratio", "one", "text_one", "a", "w", "ci")
    # the same call object is computed once; calls that merely print alike stay apart
    assert [(c.kind, c.function) for c in plan.calls] == [
        ("sum", "sum"), ("count", "count"), ("sum", "sum"), ("sum", "sum"), ("avg", "avg"),
        ("max", "max"), ("count", "count_if")]


@pytest.mark.parametrize(("column", "reason"), [
    (F.countDistinct("x").alias("n"), "DISTINCT"),
    (F.sum("x"), "no name"),
    (F.expr("sum(x) AS s"), "no name"),
    (F.collect_list("x").alias("l"), "collect_list() is not a known"),
    (F.percentile_approx("x", 0.5).alias("p"), "percentile_approx() is not a known"),
    (F.upper(F.first("s")).alias("u"), "first() is not a known"),
])
def test_undecomposable_aggregates_name_the_reason(column: Any, reason: str) -> None:
    plan, why = A.plan_two_phase([F.sum("y").alias("ok"), column])
    assert plan is None
    assert reason in why


def test_merge_sees_raw_rows_when_the_partial_columns_are_missing() -> None:
    plan, _ = A.plan_two_phase([F.sum("x").alias("s")])
    assert plan is not None
    assert A.merge_columns(plan, {"k": "int", "x": "bigint"}) is None


@pytest.mark.parametrize(("ddl", "want"), [
    ("`a` int NOT NULL, `b c` decimal(25,2)", {"a": "int", "b c": "decimal(25,2)"}),
    ("`x``y` struct<a:int,b:decimal(3,1)>, `m` map<string,array<int>>",
     {"x`y": "struct<a:int,b:decimal(3,1)>", "m": "map<string,array<int>>"}),
    ("`i` interval day to second", {"i": "interval day to second"}),
])
def test_ddl_field_types_parses_struct_to_ddl_output(ddl: str, want: dict[str, str]) -> None:
    assert ddl_field_types(ddl) == want


# ---- against Spark -------------------------------------------------------------------------------


def _two_phase(spark: Any, df: Any, aggs: list[Any], keys: list[str], tmp: Path) -> tuple[Any, bool]:
    """(merged DataFrame, whether the local phase aggregated) for ``df`` in 3 Spark partitions."""
    plan, why = A.plan_two_phase(aggs)
    assert plan is not None, why
    avg = A.avg_arguments(plan)
    types = {}
    if avg:
        fields = df.select(*[col for _, col in avg]).schema.fields
        types = {call.index: f.dataType for (call, _), f in zip(avg, fields, strict=True)}
    local_cols = A.local_columns(plan, types)
    parts = df.repartition(3)
    local = parts if local_cols is None else (
        parts.groupBy(*keys).agg(*local_cols) if keys else parts.agg(*local_cols))
    path = str(tmp / "partial")
    local.write.mode("overwrite").parquet(path)
    partial = spark.read.parquet(path)
    merge = A.merge_columns(plan, ddl_field_types(struct_to_ddl(partial.schema)))
    cols = aggs if merge is None else merge
    return (partial.groupBy(*keys).agg(*cols) if keys else partial.agg(*cols)), local_cols is not None


def _assert_same(one: Any, two: Any) -> None:
    assert [(f.name, f.dataType) for f in two.schema.fields] == [
        (f.name, f.dataType) for f in one.schema.fields]
    assert sorted(map(str, two.collect())) == sorted(map(str, one.collect()))


@pytest.fixture(scope="module")
def mixed(spark: Any) -> Any:
    return spark.sql("""select * from values
        (1, cast(1.25 as decimal(15,2)), 10, 1.5D, 'a', interval '1' day),
        (1, cast(2.50 as decimal(15,2)), null, 2.5D, 'b', interval '3' day),
        (2, null, 7, null, null, null),
        (2, cast(3.33 as decimal(15,2)), 8, 0.1D, 'c', interval '2' hour),
        (3, null, null, null, null, null)
        as t(k, d, i, x, s, iv)""")


MIXED_AGGS = [
    F.sum("d").alias("sum_d"), F.avg("d").alias("avg_d"), F.avg("i").alias("avg_i"),
    F.mean("x").alias("avg_x"), F.count(F.lit(1)).alias("cnt"), F.count("d").alias("cnt_d"),
    F.min("s").alias("min_s"), F.max("d").alias("max_d"), F.sum("i").alias("sum_i"),
    (F.sum("d") / F.sum("i")).alias("ratio"), F.round(F.avg(F.col("i").cast("double")), 2).alias("r"),
    F.avg("iv").alias("avg_iv"), F.sum("iv").alias("sum_iv"), F.count_if(F.col("i") > 7).alias("ci"),
    F.bool_or(F.col("x") > 2).alias("any_big"), F.when(F.sum("i") > 9, "big").otherwise("small").alias("w"),
]


@pytest.mark.spark
@pytest.mark.parametrize("keys", [["k"], []], ids=["keyed", "global"])
def test_two_phase_equals_one_phase_for_mixed_types_and_nulls(spark: Any, mixed: Any, keys: list[str],
                                                                tmp_path: Path) -> None:
    two, split = _two_phase(spark, mixed, MIXED_AGGS, keys, tmp_path)
    assert split
    _assert_same(mixed.groupBy(*keys).agg(*MIXED_AGGS) if keys else mixed.agg(*MIXED_AGGS), two)


@pytest.mark.spark
def test_global_aggregate_of_no_rows_counts_zero(spark: Any, mixed: Any, tmp_path: Path) -> None:
    empty = mixed.filter(F.lit(False))
    aggs = [F.count(F.lit(1)).alias("n"), F.sum("d").alias("s"), F.avg("x").alias("a")]
    two, _ = _two_phase(spark, empty, aggs, [], tmp_path)
    assert [tuple(r) for r in two.collect()] == [(0, None, None)]
    _assert_same(empty.agg(*aggs), two)


@pytest.mark.spark
@pytest.mark.parametrize(("precision", "scale", "split"), [
    (15, 2, True), (24, 2, True), (12, 3, True), (20, 6, True),
    (38, 10, False), (10, 0, False), (5, 1, False), (25, 2, False),
])
def test_decimal_sum_and_avg_keep_spark_types_and_rounding(
        spark: Any, precision: int, scale: int, split: bool, tmp_path: Path) -> None:
    rng = random.Random(precision * 100 + scale)
    bound = 10 ** (precision - 1 if precision < 30 else precision - 6)
    rows = [(rng.randint(0, 30), None if rng.random() < 0.1 else decimal.Decimal(rng.randint(-bound, bound)))
            for _ in range(1500)]
    df = spark.createDataFrame(rows, "k int, u decimal(38,0)").select(
        "k", (F.col("u") * F.lit(decimal.Decimal(1).scaleb(-scale))).cast(
            f"decimal({precision},{scale})").alias("d"))
    aggs = [F.avg("d").alias("a"), F.sum("d").alias("s"), F.min("d").alias("mn")]
    two, did_split = _two_phase(spark, df, aggs, ["k"], tmp_path)
    # DECIMALs whose average Spark rounds at a scale the merge cannot reproduce stay one phase
    assert did_split is split
    _assert_same(df.groupBy("k").agg(*aggs), two)
