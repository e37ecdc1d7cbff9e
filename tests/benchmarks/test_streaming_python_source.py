"""The benchmark's Python streaming source for Structured Streaming (``python_rate_source``):
its admission control limits each micro-batch (Spark's ``ReadMaxRows``). The reader is taken
from what the source registers, and driven as Spark's streaming source runner drives it
(``getDefaultReadLimit``, then ``latestOffset(start, limit)`` per micro-batch)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from benchmarks.streaming.programs import python_rate_source


def _reader(total: int, limit: int | None) -> Any:
    """The stream reader of a source whose ``total`` rows are all due at once."""
    registered: list[Any] = []
    load = SimpleNamespace(load=lambda: None)
    spark = SimpleNamespace(dataSource=SimpleNamespace(register=registered.append),
                            readStream=SimpleNamespace(format=lambda name: load))
    python_rate_source(spark, lambda i: (i,), 10**9, total, "id long", started=0.0,
                       max_rows_per_trigger=limit)
    (source,) = registered
    return source({}).streamReader(None)


def _micro_batches(reader: Any) -> list[int]:
    """The rows of each micro-batch until the source has no more (as Spark plans them)."""
    limit, start, rows = reader.getDefaultReadLimit(), reader.initialOffset(), []
    while (end := reader.latestOffset(start, limit)) != start:
        rows.append(end["n"] - start["n"])
        start = end
    return rows


def test_a_micro_batch_reads_at_most_max_rows_per_trigger() -> None:
    reader = _reader(1000, 300)
    assert reader.getDefaultReadLimit() == ReadMaxRows(300)
    assert _micro_batches(reader) == [300, 300, 300, 100]


def test_without_a_limit_a_micro_batch_reads_all_that_is_due() -> None:
    reader = _reader(1000, None)
    assert isinstance(reader.getDefaultReadLimit(), ReadAllAvailable)
    assert _micro_batches(reader) == [1000]
    # the engine may ask for all that is due even where the source has a limit
    assert _reader(1000, 300).latestOffset({"n": 0}, ReadAllAvailable()) == {"n": 1000}
