"""Compile-time estimates behind automatic broadcast joins: filter selectivity and the columns an
expression reads (no Spark, no cluster)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from flintlock.api.columns import column_references, sql_identifier
from flintlock.graph.size_estimates import selectivity


@pytest.mark.parametrize(("condition", "expected"), [
    (F.col("a") == 1, 0.15),
    (F.col("a") <= 1, 0.5),
    (F.col("a").isNotNull(), 0.9),
    (F.col("a").between(1, 2), 0.25),                      # two comparisons
    ((F.col("a") == 1) & (F.col("b") == 2), 0.15 * 0.15),
    ((F.col("a") == 1) | (F.col("b") == 2), 0.25),         # OR: Calcite's default guess
    (F.col("a").isin(1, 2), 0.25),
    (F.col("a") != 1, 0.25),
    (F.expr("a = 1"), 0.25),                                # SQL text is not looked into
    (None, 0.25),                                           # a Python predicate
])
def test_selectivity_follows_calcites_guesses(condition: object, expected: float) -> None:
    assert selectivity(condition) == pytest.approx(expected)


@pytest.mark.parametrize(("column", "expected"), [
    ("a", {"a"}),
    (F.col("a"), {"a"}),
    (F.col("s.x"), {"s"}),
    (F.col("`x.y`"), {"x.y"}),
    (F.expr("a"), {"a"}),
    ((F.col("a") * (1 - F.col("b"))).alias("c"), {"a", "b"}),
    (F.when(F.col("n") == "B", F.col("v")).otherwise(0), {"n", "v"}),
    (F.year("d").cast("int"), {"d"}),
    (F.lit(1), set()),
    (F.expr("a + 1"), None),
    ("*", None),
    (F.col("*"), None),
    (F.count("*"), set()),                                  # counts rows, reads no column
    (F.count(F.col("*")), set()),
    (F.count_distinct(F.col("*")), None),
])
def test_column_references(column: object, expected: set[str] | None) -> None:
    refs = column_references(column)
    assert (None if refs is None else set(refs)) == expected


def test_sql_identifier_only_for_a_plain_name() -> None:
    assert sql_identifier(F.expr("a_1")) == "a_1"
    assert sql_identifier(F.expr("`a b`")) == "a b"
    assert sql_identifier(F.expr("a + 1")) is None
    assert sql_identifier(F.col("a")) is None
