"""Windows and keyed state epoch by epoch on Spark (``TimedOperators`` over state tables).

Each test drives one operator through several epochs with chosen watermarks, as the streaming
task would, and checks what fires when: on-time firing, late firing within allowed lateness,
late rows to the side output, sliding and session windows, processing-time windows, and a
``KeyedProcessFunction`` whose state and timers survive from one epoch to the next.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from flintlock.api.functions import KeyedProcessFunction
from flintlock.api.state import MapStateDescriptor, ValueStateDescriptor
from flintlock.api.windows import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from flintlock.graph.user_code import dumps_user_function
from flintlock.runtime.ids import OperatorID
from flintlock.runtime.operators.specs import ChainedNode, SerializedFunction
from flintlock.runtime.operators.time_specs import (
    SideOutputSpec,
    StatefulProcessSpec,
    WindowSpec,
)
from flintlock.runtime.spark.errors import OperatorException
from flintlock.runtime.spark.timed_operators import TimedOperators
from flintlock.runtime.spark.window_ops import MAX_WATERMARK

pytestmark = [pytest.mark.spark]

SCHEMA = "k string, v long, ts long"


def _window_op(spark: Any, tmp_path: Path, assigner: Any, lateness: int = 0,
               late_tag: str | None = None) -> tuple[TimedOperators, ChainedNode]:
    from pyspark.sql import functions as F

    spec = WindowSpec(("k",), assigner, "ts" if assigner.event_time else None, "agg",
                      (F.count(F.lit(1)).alias("n"), F.sum("v").alias("s")),
                      allowed_lateness_ms=lateness, late_tag=late_tag)
    ops = TimedOperators(spark, lambda f: f(), str(tmp_path / "state"))
    return ops, ChainedNode(OperatorID.generate(), "window", spec)


def _epoch(ops: TimedOperators, node: ChainedNode, spark: Any, rows: list[tuple[Any, ...]],
           watermark: int, now: int = 0, schema: str = SCHEMA,
           end: bool = False, small: bool = False) -> list[tuple[Any, ...]]:
    """One epoch; ``small``: an epoch the task would write Arrow segments for (window state
    versions are then Arrow IPC files)."""
    ops.begin_epoch(watermark, now, end_of_input=end)
    out = ops.apply(0, node, spark.createDataFrame(rows, schema), "window")
    result = [tuple(r) for r in out.collect()]
    ops.write_state(small)  # after the outputs, as the streaming task does
    ops.end_epoch()
    return sorted(result)


def _ms(ts: datetime.datetime) -> int:
    return int(ts.timestamp() * 1000)


def _fired(rows: list[tuple[Any, ...]]) -> list[tuple[str, int, int, int, int]]:
    return sorted((k, _ms(ws), _ms(we), n, s) for k, ws, we, n, s in rows)


@pytest.mark.parametrize("small", [False, True], ids=["parquet-state", "arrow-state"])
def test_tumbling_windows_fire_at_the_watermark_and_again_for_rows_within_lateness(
        spark: Any, tmp_path: Path, small: bool) -> None:
    ops, node = _window_op(spark, tmp_path, TumblingEventTimeWindows.of(1000), lateness=500,
                           late_tag="late")
    late_node = ChainedNode(OperatorID.generate(), "late", SideOutputSpec("late"), chained_input=0)
    # epoch 1: rows of [0, 1000) and [1000, 2000); the watermark 998 fires nothing yet
    assert _epoch(ops, node, spark, [("a", 1, 10), ("a", 2, 990), ("a", 4, 1500)], 998,
                  small=small) == []
    assert ops.nodes[0].table.rows == 3
    assert ops.nodes[0].table.arrow == small
    version = Path(ops.nodes[0].table.path(0))
    assert (version / "state.arrow").is_file() == small
    assert bool(list(version.glob("*.parquet"))) != small
    # epoch 2: no rows; watermark 999 = end - 1 of [0, 1000): it fires once
    assert _fired(_epoch(ops, node, spark, [], 999, small=small)) == [("a", 0, 1000, 2, 3)]
    # epoch 3: a late row for [0, 1000) within the allowed lateness re-fires it, updated
    # (the state version before was written the other way: each version has its own format)
    assert _fired(_epoch(ops, node, spark, [("a", 8, 500)], 1200, small=not small)) == [
        ("a", 0, 1000, 3, 11)]
    # epoch 4: rows are judged by the watermark before them (1200): the row at 700 is still
    # within lateness and re-fires [0, 1000); the new watermark 1600 then drops that window
    assert _fired(_epoch(ops, node, spark, [("a", 16, 700), ("b", 32, 1700)], 1600,
                         small=small)) == [("a", 0, 1000, 4, 27)]
    # epoch 5: [0, 1000) is past end - 1 + lateness (1499 <= 1600): its row is late
    ops.begin_epoch(1700, 0)
    df = spark.createDataFrame([("a", 64, 600)], SCHEMA)
    out = ops.apply(0, node, df, "window")
    late = ops.apply(1, late_node, df, "late")
    assert _fired([tuple(r) for r in out.collect()]) == []
    assert [tuple(r) for r in late.collect()] == [("a", 64, 600)]
    # end of input: every window left fires
    assert _fired(_epoch(ops, node, spark, [], MAX_WATERMARK)) == [
        ("a", 1000, 2000, 1, 4), ("b", 1000, 2000, 1, 32)]
    assert ops.nodes[0].table.rows == 0


def test_a_window_writes_its_new_state_only_after_the_epochs_outputs(
        spark: Any, tmp_path: Path) -> None:
    ops, node = _window_op(spark, tmp_path, TumblingEventTimeWindows.of(1000))
    assert _epoch(ops, node, spark, [("a", 1, 10), ("b", 2, 1500)], 998) == []
    table = ops.nodes[0].table
    assert (table.version, table.rows) == (0, 2)
    # epoch 2: [0, 1000) fires; its output is computed from version 0 and the new rows...
    ops.begin_epoch(999, 0)
    out = ops.apply(0, node, spark.createDataFrame([("b", 4, 1600)], SCHEMA), "window")
    assert (table.version, table.rows) == (0, 2)  # nothing written while the chain translates
    assert _fired([tuple(r) for r in out.collect()]) == [("a", 0, 1000, 1, 1)]
    # ...and the state after the epoch (the rows of [1000, 2000)) is written after it
    ops.write_state()
    ops.end_epoch()
    assert (table.version, table.rows) == (1, 2)
    assert ops.nodes[0].next_event == 1999
    assert _fired(_epoch(ops, node, spark, [], 1999)) == [("b", 1000, 2000, 2, 6)]


def test_sliding_windows_put_a_row_into_each_window_that_contains_it(spark: Any, tmp_path: Path) -> None:
    ops, node = _window_op(spark, tmp_path, SlidingEventTimeWindows.of(2000, 1000))
    assert _epoch(ops, node, spark, [("a", 1, 1500), ("a", 2, 2500)], 1000) == []
    assert _fired(_epoch(ops, node, spark, [], 2999)) == [
        ("a", 0, 2000, 1, 1), ("a", 1000, 3000, 2, 3)]
    assert _fired(_epoch(ops, node, spark, [], MAX_WATERMARK)) == [("a", 2000, 4000, 1, 2)]


def test_session_windows_merge_across_epochs_and_fire_after_the_gap(spark: Any, tmp_path: Path) -> None:
    ops, node = _window_op(spark, tmp_path, EventTimeSessionWindows.with_gap(1000))
    assert _epoch(ops, node, spark, [("a", 1, 0), ("a", 2, 800), ("b", 5, 100)], 500) == []
    # a row at 1700 extends a's session [0, 1800) to [0, 2700); b's [100, 1100) fires at 1099
    assert _fired(_epoch(ops, node, spark, [("a", 4, 1700)], 1500)) == [("b", 100, 1100, 1, 5)]
    assert _fired(_epoch(ops, node, spark, [("a", 8, 5000)], 3000)) == [("a", 0, 2700, 3, 7)]
    assert _fired(_epoch(ops, node, spark, [], MAX_WATERMARK)) == [("a", 5000, 6000, 1, 8)]


def test_processing_time_windows_fire_by_the_clock(spark: Any, tmp_path: Path) -> None:
    ops, node = _window_op(spark, tmp_path, TumblingProcessingTimeWindows.of(1000))
    assert _epoch(ops, node, spark, [("a", 1, 0), ("a", 2, 0)], 0, now=10_200) == []
    assert ops.due(0, 10_500) is False and ops.due(0, 10_999) is True
    assert _fired(_epoch(ops, node, spark, [("a", 4, 0)], 0, now=11_000)) == [
        ("a", 10_000, 11_000, 2, 3)]
    # the end of input fires what is left (a bounded stream loses no window), rows that arrive
    # with it are assigned by the clock
    assert _fired(_epoch(ops, node, spark, [("b", 8, 0)], 0, now=11_500, end=True)) == [
        ("a", 11_000, 12_000, 1, 4), ("b", 11_000, 12_000, 1, 8)]


def test_an_event_time_column_of_the_wrong_type_names_the_operator(spark: Any, tmp_path: Path) -> None:
    ops, node = _window_op(spark, tmp_path, TumblingEventTimeWindows.of(1000))
    ops.begin_epoch(0, 0)
    df = spark.createDataFrame([("a", 1, "x")], "k string, v long, ts string")
    with pytest.raises(OperatorException, match="'ts' is a string; event time needs a TIMESTAMP"):
        ops.apply(0, node, df, "Operator 'window'")


class _Alert(KeyedProcessFunction):
    """Per key: count rows; one second after the first row, emit the count seen by then."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))
        self.first = runtime_context.get_map_state(MapStateDescriptor("first"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.count.update((self.count.value() or 0) + 1)
        if self.first.is_empty():
            self.first.put("at", ctx.timestamp())
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1000)
        return []

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield (ctx.get_current_key(), timestamp, self.count.value())
        self.count.clear()
        self.first.clear()


def test_keyed_state_and_event_time_timers_carry_over_between_epochs(spark: Any, tmp_path: Path) -> None:
    spec = StatefulProcessSpec(("k",), SerializedFunction("_Alert", dumps_user_function(_Alert())),
                               "k string, fired long, count long", "ts")
    node = ChainedNode(OperatorID.generate(), "alert", spec)
    ops = TimedOperators(spark, lambda f: f(), str(tmp_path / "state"))
    assert _epoch(ops, node, spark, [("a", 1, 100), ("a", 1, 300), ("b", 1, 200)], 250) == []
    assert ops.nodes[0].table.rows == 2 and ops.nodes[0].next_event == 1100
    assert ops.due(1099, 0) is False and ops.due(1100, 0) is True
    # the timer at 1100 fires between the rows at 1000 and 1200 (event-time order)
    rows = [("a", 1, 1200), ("a", 1, 1000), ("b", 1, 1150)]
    assert _epoch(ops, node, spark, rows, 1500) == [("a", 1100, 3), ("b", 1200, 2)]
    # a's row at 1200 started a new count with a timer at 2200; the end of input fires it
    assert _epoch(ops, node, spark, [], MAX_WATERMARK) == [("a", 2200, 1)]
    assert ops.nodes[0].table.rows == 0


def _max_v(acc: Any, row: Any) -> Any:
    return (row.k, max(acc.v, row.v), row.ts)  # the last row's time: event-time order


class _Describe:
    def process(self, key: Any, context: Any, rows: Any) -> Any:
        w = context.window()
        yield (key, w.start, w.end, ",".join(str(r.v) for r in rows))


@pytest.mark.parametrize("function", ["reduce", "process"])
def test_reduce_and_process_window_functions_see_a_fired_windows_rows_in_time_order(
        spark: Any, tmp_path: Path, function: str) -> None:
    from flintlock.api.functions import ProcessWindowFunction

    if function == "reduce":
        fn, schema = _max_v, ""
    else:
        fn = type("Describe", (_Describe, ProcessWindowFunction), {})().process
        schema = "k string, start long, end long, vs string"
    spec = WindowSpec(("k",), TumblingEventTimeWindows.of(1000), "ts", function,
                      fn=SerializedFunction(function, dumps_user_function(fn)),
                      output_schema=schema)
    ops = TimedOperators(spark, lambda f: f(), str(tmp_path / "state"))
    node = ChainedNode(OperatorID.generate(), "window", spec)
    assert _epoch(ops, node, spark, [("a", 5, 300), ("a", 2, 100)], 500) == []
    fired = _epoch(ops, node, spark, [("a", 3, 900), ("a", 9, 1200)], 1000)
    if function == "reduce":
        assert [(k, v, ts, _ms(ws), _ms(we)) for k, v, ts, ws, we in fired] == [
            ("a", 5, 900, 0, 1000)]
    else:
        assert fired == [("a", 0, 1000, "2,5,3")]


def test_restored_state_outlives_the_checkpoint_it_came_from(spark: Any, tmp_path: Path) -> None:
    """A restored attempt copies the checkpoint's state: the checkpoint may be discarded (a
    newer one completed, ``num-retained``) while a subtask that received no rows since still
    holds that version, and its next checkpoint must still carry the state."""
    import shutil

    spec = StatefulProcessSpec(("k",), SerializedFunction("_Alert", dumps_user_function(_Alert())),
                               "k string, fired long, count long", "ts")
    node = ChainedNode(OperatorID.generate(), "alert", spec)
    ops = TimedOperators(spark, lambda f: f(), str(tmp_path / "attempt-0"))
    _epoch(ops, node, spark, [("a", 1, 100), ("a", 1, 300), ("b", 1, 200)], 250)
    first = ops.snapshot(str(tmp_path / "chk-1"), {0: "alert"})
    assert first[0].rows == 2 and first[0].size_bytes > 0

    restored = TimedOperators(spark, lambda f: f(), str(tmp_path / "attempt-1"))
    restored.restore(first)
    shutil.rmtree(tmp_path / "chk-1")  # discarded once chk-2 completed
    second = restored.snapshot(str(tmp_path / "chk-2"), {0: "alert"})  # no epoch in between
    assert second[0].rows == 2 and second[0].size_bytes > 0

    again = TimedOperators(spark, lambda f: f(), str(tmp_path / "attempt-2"))
    again.restore(second)
    rows = [("a", 1, 1200), ("a", 1, 1000), ("b", 1, 1150)]
    assert _epoch(again, node, spark, rows, 1500) == [("a", 1100, 3), ("b", 1200, 2)]


def test_a_checkpoint_whose_state_files_are_missing_fails_the_restore(
        spark: Any, tmp_path: Path) -> None:
    spec = StatefulProcessSpec(("k",), SerializedFunction("_Alert", dumps_user_function(_Alert())),
                               "k string, fired long, count long", "ts")
    node = ChainedNode(OperatorID.generate(), "alert", spec)
    ops = TimedOperators(spark, lambda f: f(), str(tmp_path / "attempt-0"))
    _epoch(ops, node, spark, [("a", 1, 100)], 250)
    (handle,) = ops.snapshot(str(tmp_path / "chk-1"), {0: "alert"})
    import shutil

    shutil.rmtree(tmp_path / "chk-1")
    with pytest.raises(FileNotFoundError, match="of 1 rows is missing"):
        TimedOperators(spark, lambda f: f(), str(tmp_path / "attempt-1")).restore((handle,))


@pytest.mark.parametrize("small", [False, True], ids=["parquet-state", "arrow-state"])
def test_restored_window_state_fires_and_changed_key_columns_are_refused(
        spark: Any, tmp_path: Path, small: bool) -> None:
    ops, node = _window_op(spark, tmp_path, TumblingEventTimeWindows.of(1000))
    assert _epoch(ops, node, spark, [("a", 2, 100), ("b", 3, 200)], 250, small=small) == []
    (handle,) = ops.snapshot(str(tmp_path / "chk-1"), {0: "window"})
    assert handle.kind == "" and handle.rows == 2  # no prepare(chain): kind not known here
    assert (Path(handle.state_dir) / "state.arrow").is_file() == small

    restored, _ = _window_op(spark, tmp_path / "attempt-1", TumblingEventTimeWindows.of(1000))
    restored.restore((handle,))
    assert restored.nodes[0].table.arrow == small
    fired = _epoch(restored, node, spark, [("a", 5, 300)], 1000)
    assert [(k, n, s) for k, _, _, n, s in fired] == [("a", 2, 7), ("b", 1, 3)]

    changed, _ = _window_op(spark, tmp_path / "attempt-2", TumblingEventTimeWindows.of(1000))
    changed.restore((handle,))
    with pytest.raises(OperatorException, match=r"k string -> bigint.*new uid\(\)") as info:
        _epoch(changed, node, spark, [(1, 5, 300)], 1000, schema="k long, v long, ts long")
    assert info.value.non_recoverable


class _AlertAsList(_Alert):
    """``_Alert`` changed: its "count" is now a list state."""

    def open(self, runtime_context: Any) -> None:
        from flintlock.api.state import ListStateDescriptor

        self.count = runtime_context.get_list_state(ListStateDescriptor("count"))


def test_keyed_state_restored_as_another_kind_fails_without_restarts(
        spark: Any, tmp_path: Path) -> None:
    from flintlock.runtime.spark.errors import describe_spark_error, is_analysis_error

    def spec(fn: Any) -> StatefulProcessSpec:
        return StatefulProcessSpec(("k",), SerializedFunction("alert", dumps_user_function(fn)),
                                   "k string, fired long, count long", "ts")

    ops = TimedOperators(spark, lambda f: f(), str(tmp_path / "attempt-0"))
    _epoch(ops, ChainedNode(OperatorID.generate(), "alert", spec(_Alert())), spark,
           [("a", 1, 100)], 250)
    handles = ops.snapshot(str(tmp_path / "chk-1"), {0: "alert"})
    changed = TimedOperators(spark, lambda f: f(), str(tmp_path / "attempt-1"))
    changed.restore(handles)
    node = ChainedNode(OperatorID.generate(), "alert", spec(_AlertAsList()))
    with pytest.raises(Exception) as info:
        _epoch(changed, node, spark, [("a", 1, 300)], 400)
    cause = describe_spark_error(info.value)
    assert "StateMigrationException" in cause and "'count' was restored as a value state" in str(
        info.value), cause
    assert is_analysis_error(info.value)  # no restart can fix it


def test_window_epochs_reuse_the_classes_compiled_for_the_first_ones(spark: Any, tmp_path: Path) -> None:
    """The epoch's watermarks reach the plan as data, not literals: later epochs with other rows
    and other watermarks compile no new class (each would cost Janino and the JIT)."""
    from flintlock.runtime.spark.session import embedded_codegen_compilations

    if embedded_codegen_compilations() is None:
        pytest.skip("Spark runs remotely: its code generator's metrics are not in this process")
    ops, node = _window_op(spark, tmp_path, TumblingEventTimeWindows.of(1000))
    fired = []
    # two epochs with state before them: the plans of every later epoch are compiled by then
    for n in range(1, 3):
        fired += _fired(_epoch(ops, node, spark, [("a", n, n * 1000 + 5), ("b", n, n * 1000 + 7)],
                               n * 1000 - 1))
    before = embedded_codegen_compilations()
    for n in range(3, 6):
        fired += _fired(_epoch(ops, node, spark, [("a", n, n * 1000 + 5), ("b", n, n * 1000 + 9),
                                                  ("c", n, n * 1000 + 11)], n * 1000 - 1))
    compiled = embedded_codegen_compilations() - before
    assert compiled == 0, f"epochs 3-5 compiled {compiled} new classes"
    assert fired == [("a", 1000, 2000, 1, 1), ("b", 1000, 2000, 1, 1),
                     ("a", 2000, 3000, 1, 2), ("b", 2000, 3000, 1, 2),
                     ("a", 3000, 4000, 1, 3), ("b", 3000, 4000, 1, 3), ("c", 3000, 4000, 1, 3),
                     ("a", 4000, 5000, 1, 4), ("b", 4000, 5000, 1, 4), ("c", 4000, 5000, 1, 4)]
