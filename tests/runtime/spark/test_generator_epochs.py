"""A ``DataGeneratorSource``'s epochs on Spark, and user functions kept by Spark's Python workers.

- The indices of an epoch's ranges reach Spark as rows of a local relation, so every epoch reuses
  the classes Spark compiled for the first one (``spark.range`` bounds would be inlined literals:
  a new class per epoch).
- A Python worker unpickles a user function once and keeps it for its later tasks, so the
  program's module-level state (a table loaded once) is not rebuilt every epoch.
"""

from __future__ import annotations

from typing import Any

import cloudpickle
import pytest

from flintlock.connectors.datagen import DataGeneratorSource, GeneratorSplit
from flintlock.runtime.spark import python_ops
from flintlock.runtime.spark.connector_io import GENERATOR_SLICE_ROWS, read_source
from flintlock.runtime.spark.epoch_sources import GeneratorRange


def _square(i: int) -> tuple[int, int]:
    return (i, i * i)


@pytest.mark.spark
def test_an_epochs_ranges_yield_each_index_of_their_subtask_once(spark: Any) -> None:
    source = DataGeneratorSource(_square, None, None, "i long, sq long")
    first, second = GeneratorSplit(0, 3, None), GeneratorSplit(2, 3, None)
    n = GENERATOR_SLICE_ROWS + 5  # two slices
    ranges = [GeneratorRange(first, 10, 10 + n), GeneratorRange(second, 0, 4),
              GeneratorRange(second, 7, 7)]
    read = read_source(spark, source, ranges)
    table = read.df.toArrow()
    expected = [10 * 3 + 3 * k for k in range(n)] + [2, 5, 8, 11]
    assert read.records == n + 4
    assert sorted(table.column("i").to_pylist()) == sorted(expected)
    assert table.column("sq").to_pylist() == [i * i for i in table.column("i").to_pylist()]
    assert read_source(spark, source, [GeneratorRange(first, 4, 4)]).df.count() == 0


@pytest.mark.spark
def test_generator_epochs_after_the_first_compile_no_new_classes(spark: Any) -> None:
    from flintlock.runtime.spark.session import embedded_codegen_compilations

    if embedded_codegen_compilations() is None:
        pytest.skip("Spark runs remotely: its code generator's metrics are not in this process")
    source = DataGeneratorSource(_square, None, None, "i long, sq long")
    split = GeneratorSplit(1, 2, None)

    def epoch(start: int, end: int) -> list[int]:
        return read_source(spark, source, [GeneratorRange(split, start, end)]) \
            .df.toArrow().column("i").to_pylist()

    assert epoch(0, 100) == [1 + 2 * k for k in range(100)]
    before = embedded_codegen_compilations()
    seen = [epoch(start, start + size) for start, size in ((100, 37), (137, 1000), (1137, 5))]
    compiled = embedded_codegen_compilations() - before
    assert compiled == 0, f"three more epochs compiled {compiled} new classes"
    assert [len(s) for s in seen] == [37, 1000, 5] and seen[2][-1] == 1 + 2 * 1141


def test_a_worker_unpickles_a_function_once_and_keeps_its_state_between_tasks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(python_ops, "_loaded", type(python_ops._loaded)())
    calls: list[int] = []

    def count(i: int) -> int:
        calls.append(i)
        return len(calls)

    payload = cloudpickle.dumps(count)
    first = python_ops._load("count", payload)
    assert first(1) == 1
    # a later task of the same function in this worker: the same function, its state kept
    assert python_ops._load("count", payload)(2) == 2
    # another function (other bytes) is unpickled apart
    assert python_ops._load("other", cloudpickle.dumps(lambda i: -i))(5) == -5


def test_a_worker_keeps_only_the_newest_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(python_ops, "_loaded", type(python_ops._loaded)())
    monkeypatch.setattr(python_ops, "LOADED_FUNCTIONS_MAX", 2)
    payloads = [cloudpickle.dumps(lambda i, k=k: i + k) for k in range(3)]
    kept = [python_ops._unpickled(p) for p in payloads[:2]]
    assert python_ops._unpickled(payloads[0]) is kept[0]  # used: now the newest
    python_ops._unpickled(payloads[2])  # evicts payloads[1], the least recently used
    assert python_ops._unpickled(payloads[0]) is kept[0]
    assert python_ops._unpickled(payloads[1]) is not kept[1]
    assert len(python_ops._loaded) == 2


def test_a_payload_that_cannot_be_unpickled_names_the_function_and_is_not_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(python_ops, "_loaded", type(python_ops._loaded)())
    with pytest.raises(python_ops.UserFunctionError, match="user function 'broken' cannot be"):
        python_ops._load("broken", b"not a pickle")
    assert not python_ops._loaded


def test_a_generator_function_gets_each_index_of_its_slices_and_may_return_tuples_dicts_or_rows() -> None:
    import pyarrow as pa
    from pyspark.sql import Row

    from flintlock.runtime.operators.specs import SerializedFunction

    schema = pa.schema([("id", pa.int64()), ("word", pa.string())])
    # positions 1..2 of subtask 1 of 2 (indices 3, 5), then position 4 of subtask 0 of 1
    batch = pa.record_batch([pa.array(v, pa.int64()) for v in ([1, 4], [3, 5], [2, 1], [1, 0])],
                            names=["start", "end", "p", "s"])

    def run(fn: Any) -> list[dict[str, Any]]:
        gen = python_ops.generator_fn(SerializedFunction("gen", cloudpickle.dumps(fn)), schema)
        return [row for out in gen(iter([batch])) for row in out.to_pylist()]

    expected = [{"id": i, "word": f"w{i}"} for i in (3, 5, 4)]
    assert run(lambda i: (i, f"w{i}")) == expected  # tuples: the transposing fast path
    assert run(lambda i: {"word": f"w{i}", "id": i}) == expected  # by name
    assert run(lambda i: Row(word=f"w{i}", id=i)) == expected
    with pytest.raises(ValueError, match="has 1 fields; the output schema has 2"):
        run(lambda i: (i,))
    with pytest.raises(python_ops.UserFunctionError, match="user function 'gen' failed"):
        run(lambda i: 1 // 0)


def test_the_cyclic_garbage_collector_waits_while_a_batch_is_built_and_is_restored() -> None:
    import gc

    import pyarrow as pa

    from flintlock.runtime.operators.specs import SerializedFunction

    schema = pa.schema([("id", pa.int64()), ("gc", pa.bool_())])
    batch = pa.record_batch([pa.array(v, pa.int64()) for v in ([0], [3], [1], [0])],
                            names=["start", "end", "p", "s"])

    def run(fn: Any) -> list[dict[str, Any]]:
        gen = python_ops.generator_fn(SerializedFunction("gen", cloudpickle.dumps(fn)), schema)
        return [row for out in gen(iter([batch])) for row in out.to_pylist()]

    def fails(i: int) -> Any:
        raise KeyError(i)

    assert gc.isenabled()
    try:
        assert run(lambda i: (i, gc.isenabled())) == [{"id": i, "gc": False} for i in range(3)]
        assert gc.isenabled()
        with pytest.raises(python_ops.UserFunctionError, match="'gen' failed: KeyError: 0"):
            run(fails)
        assert gc.isenabled()
        gc.disable()  # a program that turned it off keeps it off
        assert run(lambda i: (i, gc.isenabled()))[0]["gc"] is False
        assert not gc.isenabled()
    finally:
        gc.enable()
