"""Python-function operators on Spark's Arrow-based Python execution.

Every operator here becomes ``mapInArrow``, ``mapInPandas`` or ``groupBy(keys).applyInArrow``: Spark
ships Arrow record batches to its Python workers, our worker-side function turns them into
``pyspark.sql.Row`` objects for the user function and the results back into Arrow batches. No RDD,
no row-at-a-time pickling, no Python loop outside Spark.

User functions travel as ``SerializedFunction`` payload bytes and are unpickled once per worker
call (``_load``); the Task unpickles each once up front (``check_loadable``) so that a function that
cannot be unpickled fails fast, non-recoverably, naming the function.

Result rows may be tuples/lists (positional), dicts (by name), ``Row`` objects (by name when they
have field names, else positional) or a bare value for a one-column schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import cloudpickle
import pyarrow as pa

from flintlock.runtime.operators.specs import SerializedFunction
from flintlock.runtime.spark.errors import FunctionLoadException

__all__ = [
    "check_loadable",
    "filter_fn",
    "flat_map_fn",
    "map_batches_fn",
    "map_fn",
    "process_fn",
    "reduce_fn",
    "timestamp_fn",
]


def check_loadable(fn: SerializedFunction, where: str) -> Callable[..., Any]:
    """Unpickle ``fn`` in the Task; raise a non-recoverable error naming it when that fails."""
    try:
        obj = cloudpickle.loads(fn.payload)
    except Exception as exc:
        raise FunctionLoadException(
            f"{where}: cannot unpickle function '{fn.name}': {type(exc).__name__}: {exc}",
            non_recoverable=True,
        ) from exc
    if not callable(obj):
        raise FunctionLoadException(
            f"{where}: function '{fn.name}' unpickled to a {type(obj).__name__}, not a callable",
            non_recoverable=True,
        )
    return obj  # type: ignore[no-any-return]


class UserFunctionError(RuntimeError):
    """A user function raised in the Spark Python worker; the message names the function."""


def _load(name: str, payload: bytes, iterate: bool = False) -> Callable[..., Any]:
    """Unpickle a user function in the worker, wrapped so that its errors name it."""
    try:
        user = cloudpickle.loads(payload)
    except Exception as exc:
        raise UserFunctionError(
            f"user function '{name}' cannot be unpickled in the Spark Python worker: {exc}"
        ) from exc

    def guarded(*args: Any) -> Any:
        try:
            result = user(*args)
            if iterate:
                return list(result) if result is not None else []
            return result
        except Exception as exc:
            raise UserFunctionError(
                f"user function '{name}' failed: {type(exc).__name__}: {exc}"
            ) from exc

    return guarded


def _rows(data: pa.RecordBatch | pa.Table) -> list[Any]:
    from pyspark.sql import Row

    names = data.schema.names
    row_cls = Row(*names)
    columns = [c.to_pylist() for c in data.columns]
    if not columns:
        return [row_cls() for _ in range(data.num_rows)]
    return [row_cls(*values) for values in zip(*columns, strict=False)]


def _values(item: Any, names: list[str]) -> list[Any]:
    from pyspark.sql import Row

    if isinstance(item, Row):
        if hasattr(item, "__fields__"):
            d = item.asDict()
            if all(n in d for n in names):
                return [d[n] for n in names]
        return list(item)
    if isinstance(item, dict):
        return [item.get(n) for n in names]
    if isinstance(item, (tuple, list)):
        return list(item)
    return [item]


def _to_batch(items: Iterable[Any], schema: pa.Schema) -> pa.RecordBatch:
    names = schema.names
    columns: list[list[Any]] = [[] for _ in names]
    for item in items:
        values = _values(item, names)
        if len(values) != len(names):
            raise ValueError(
                f"result {item!r} has {len(values)} fields; the output schema has {len(names)} "
                f"({', '.join(names)})"
            )
        for col, value in zip(columns, values, strict=False):
            col.append(value)
    arrays = [pa.array(col, type=field.type) for col, field in zip(columns, schema, strict=False)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def map_fn(fn: SerializedFunction, out_schema: pa.Schema) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` function applying ``fn(row) -> row`` to every row."""
    name, payload = fn.name, fn.payload

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        user = _load(name, payload)
        for batch in batches:
            yield _to_batch((user(row) for row in _rows(batch)), out_schema)

    return run


def flat_map_fn(fn: SerializedFunction, out_schema: pa.Schema) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` function applying ``fn(row) -> iterable of rows``."""
    name, payload = fn.name, fn.payload

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        user = _load(name, payload, iterate=True)
        for batch in batches:
            out: list[Any] = []
            for row in _rows(batch):
                out.extend(user(row))
            yield _to_batch(out, out_schema)

    return run


def filter_fn(fn: SerializedFunction) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` function keeping the rows for which ``fn(row)`` is truthy."""
    name, payload = fn.name, fn.payload

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        user = _load(name, payload)
        for batch in batches:
            mask = pa.array([bool(user(row)) for row in _rows(batch)], type=pa.bool_())
            yield batch.filter(mask)

    return run


def map_batches_fn(fn: SerializedFunction) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """``mapInArrow``/``mapInPandas`` function applying ``fn(batch) -> batch`` to every batch."""
    name, payload = fn.name, fn.payload

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        user = _load(name, payload)
        for batch in batches:
            result = user(batch)
            if isinstance(result, pa.Table):
                yield from result.to_batches()
            elif result is not None:
                yield result

    return run


def timestamp_fn(fn: SerializedFunction, out_schema: pa.Schema) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` function appending ``fn(row, previous) -> epoch ms`` as the last column
    (a ``TimestampAssigner``; ``previous`` is ``-2**63``, Flink's "no timestamp")."""
    name, payload = fn.name, fn.payload

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        user = _load(name, payload)
        for batch in batches:
            stamps = pa.array([int(user(row, -(2**63))) for row in _rows(batch)], type=pa.int64())
            yield pa.RecordBatch.from_arrays([*batch.columns, stamps], schema=out_schema)

    return run


def _key_value(key: tuple[Any, ...]) -> Any:
    values = tuple(k.as_py() if hasattr(k, "as_py") else k for k in key)
    return values[0] if len(values) == 1 else values


def process_fn(fn: SerializedFunction, out_schema: pa.Schema) -> Callable[[tuple[Any, ...], pa.Table], pa.Table]:
    """``applyInArrow`` function: ``fn(key, rows) -> iterable of rows`` over one key's rows.

    ``key`` is the key value for one key column, a tuple for several.
    """
    name, payload = fn.name, fn.payload

    def run(key: tuple[Any, ...], table: pa.Table) -> pa.Table:
        user = _load(name, payload, iterate=True)
        batch = _to_batch(user(_key_value(key), _rows(table)), out_schema)
        return pa.Table.from_batches([batch], schema=out_schema)

    return run


def reduce_fn(fn: SerializedFunction) -> Callable[[tuple[Any, ...], pa.Table], pa.Table]:
    """``applyInArrow`` function folding one key's rows with ``fn(acc, row) -> row``."""
    name, payload = fn.name, fn.payload

    def run(key: tuple[Any, ...], table: pa.Table) -> pa.Table:
        user = _load(name, payload)
        rows = _rows(table)
        if not rows:
            return table.slice(0, 0)
        from pyspark.sql import Row

        names = table.schema.names
        row_cls = Row(*names)
        acc = rows[0]
        for row in rows[1:]:
            acc = row_cls(*_values(user(acc, row), names))
        batch = _to_batch([acc], table.schema)
        return pa.Table.from_batches([batch], schema=table.schema)

    return run
