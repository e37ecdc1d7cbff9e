"""Plans that cost the Spark Connect server no extra analysis (``connect_plans``), and a window
operator built from them whose aggregate names need quoting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flintlock.api.windows import TumblingEventTimeWindows
from flintlock.runtime.ids import OperatorID
from flintlock.runtime.operators.specs import ChainedNode
from flintlock.runtime.operators.time_specs import WindowSpec
from flintlock.runtime.spark.connect_plans import field_name, observe, select_except, with_columns
from flintlock.runtime.spark.timed_operators import TimedOperators
from flintlock.runtime.spark.window_ops import MAX_WATERMARK

pytestmark = [pytest.mark.spark]


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def test_with_columns_and_select_except_give_what_with_columns_and_drop_give(spark: Any) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(1, "x", 10), (2, "y", 20)], "`a.b` long, s string, n long")
    names = ["a.b", "s", "n"]
    added = {"s": F.upper("s"), "m": F.col("n") * 2, "a.b": F.col("`a.b`") + 1}
    ours = with_columns(df, names, added)
    spark_s = df.withColumns(added)
    assert ours.columns == spark_s.columns == ["a.b", "s", "n", "m"]  # replaced in place
    assert _rows(ours) == _rows(spark_s) == [(2, "X", 10, 20), (3, "Y", 20, 40)]
    assert select_except(df, names, ("s", "gone")).columns == df.drop("s").columns == ["a.b", "n"]


def test_observe_asks_the_server_nothing_before_the_plan_runs(spark: Any, tmp_path: Path,
                                                              monkeypatch: Any) -> None:
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    asked: list[str] = []
    client = spark.client
    analyze = client._analyze

    def counting(method: str, **kwargs: Any) -> Any:
        asked.append(method)
        return analyze(method=method, **kwargs)

    monkeypatch.setattr(client, "_analyze", counting)
    df = spark.range(0, 100).select((F.col("id") % 3).alias("k"))
    obs = Observation("rows_seen")
    observed = observe(df, obs, F.count(F.lit(1)).alias("rows"), F.max("k").alias("mx"))
    assert asked == []  # Connect's own Observation would ask whether df is streaming
    observed.write.mode("overwrite").parquet(str(tmp_path / "out"))
    assert obs.get == {"rows": 100, "mx": 2}


def test_a_window_with_unaliased_aggregates_keeps_their_names(
        spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    spec = WindowSpec(("key",), TumblingEventTimeWindows.of(1000), "ts", "agg",
                      (F.sum("v"), F.max("v").alias("top")))
    ops = TimedOperators(spark, lambda f: f(), str(tmp_path / "state"))
    node = ChainedNode(OperatorID.generate(), "window", spec)
    schema = "key string, v long, ts long"
    for rows, watermark in ([("a", 1, 10), ("a", 2, 20), ("b", 5, 1500)], 500),  \
                           ([("a", 4, 900)], 999), ([], MAX_WATERMARK):
        ops.begin_epoch(watermark, 0, end_of_input=watermark == MAX_WATERMARK)
        out = ops.apply(0, node, spark.createDataFrame(rows, schema), "window")
        fired = [(r[0], r[3], r[4]) for r in out.collect()]
        columns = out.columns
        ops.write_state()
        ops.end_epoch()
        if watermark == 999:
            assert columns == ["key", "window_start", "window_end", "sum(v)", "top"]
            assert fired == [("a", 7, 4)]  # the second epoch's row joined the first's
        if watermark == MAX_WATERMARK:
            assert fired == [("b", 5, 5)]


@pytest.mark.parametrize(("reference", "name"), [
    ("`a.b`", "a.b"), ("`a``b`", "a`b"), ("k", "k"), ("a.b", "a.b"), ("`a`.`b`", "`a`.`b`")])
def test_field_name_reads_a_backquoted_reference_as_pyspark_does(reference: str, name: str) -> None:
    assert field_name(reference) == name


def test_a_window_and_a_keyed_process_keyed_by_a_backquoted_dotted_column(
        spark: Any, tmp_path: Path) -> None:
    """``key_by("`a.b`")`` (PySpark's quoting of a name with a dot) works in windows and keyed
    state as in a batch aggregation: the fired windows' key column is ``a.b``."""
    from pyspark.sql import functions as F

    from flintlock.api.functions import KeyedProcessFunction
    from flintlock.api.state import ValueStateDescriptor
    from flintlock.graph.user_code import dumps_user_function
    from flintlock.runtime.operators.specs import SerializedFunction
    from flintlock.runtime.operators.time_specs import StatefulProcessSpec

    class Count(KeyedProcessFunction):
        def open(self, runtime_context: Any) -> None:
            self.n = runtime_context.get_state(ValueStateDescriptor("n"))

        def process_element(self, value: Any, ctx: Any) -> Any:
            self.n.update((self.n.value() or 0) + 1)
            yield (ctx.get_current_key(), self.n.value())

    schema = "`a.b` string, v long, ts long"
    window = WindowSpec(("`a.b`",), TumblingEventTimeWindows.of(1000), "ts", "agg",
                        (F.sum("v").alias("s"),))
    process = StatefulProcessSpec(("`a.b`",), SerializedFunction("Count", dumps_user_function(
        Count())), "k string, n long", "ts")
    for i, spec in enumerate((window, process)):
        ops = TimedOperators(spark, lambda f: f(), str(tmp_path / f"state-{i}"))
        node = ChainedNode(OperatorID.generate(), "op", spec)
        seen = []
        for rows, watermark in ([("x", 1, 10), ("x", 2, 20), ("y", 5, 1500)], 500), \
                               ([("x", 4, 900)], MAX_WATERMARK):
            ops.begin_epoch(watermark, 0, end_of_input=watermark == MAX_WATERMARK)
            out = ops.apply(0, node, spark.createDataFrame(rows, schema), "op")
            seen.append((out.columns, sorted(tuple(r) for r in out.collect())))
            ops.write_state()
            ops.end_epoch()
        if spec is window:
            assert seen[1][0] == ["a.b", "window_start", "window_end", "s"]
            assert [(r[0], r[3]) for r in seen[1][1]] == [("x", 7), ("y", 5)]
        else:
            assert seen == [(["k", "n"], [("x", 1), ("x", 2), ("y", 1)]),
                            (["k", "n"], [("x", 3)])]
