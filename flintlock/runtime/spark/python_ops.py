"""Python-function operators on Spark's Arrow-based Python execution.

Every operator here becomes ``mapInArrow``, ``mapInPandas`` or ``groupBy(keys).applyInArrow``: Spark
ships Arrow record batches to its Python workers, our worker-side function turns them into
``pyspark.sql.Row`` objects for the user function and the results back into Arrow batches. No RDD,
no row-at-a-time pickling, no Python loop outside Spark.

User functions travel as ``SerializedFunction`` payload bytes. A Python worker unpickles each payload
once and keeps the function for its later tasks (``_load``; the newest ``LOADED_FUNCTIONS_MAX``
payloads by digest): Spark reuses its workers across tasks, and a streaming subtask runs a task per
epoch, so a per-call unpickle would cost every epoch (every window, for per-group functions) what a
program's module-level state costs to build, e.g. a lookup table read once at import. The program's
own modules travel by value (``graph.user_code``), so this cache is what keeps their globals alive
across tasks, as an importable module's globals live on in a reused PySpark worker; as in Flink, a
user function object outlives a single batch of records (it is not per subtask here: a worker's
tasks of one function share it). The Task unpickles each once up front (``check_loadable``) so that
a function that cannot be unpickled fails fast, non-recoverably, naming the function.

Result rows may be tuples/lists (positional), dicts (by name), ``Row`` objects (by name when they
have field names, else positional) or a bare value for a one-column schema.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import threading
from collections import OrderedDict
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
    "generator_fn",
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


#: how many unpickled user functions a Python worker keeps (least recently used dropped first)
LOADED_FUNCTIONS_MAX = 32
_loaded: OrderedDict[bytes, Any] = OrderedDict()
_loaded_lock = threading.Lock()


def _unpickled(payload: bytes) -> Any:
    """The function of ``payload``, unpickled on its first use in this worker process."""
    digest = hashlib.blake2b(payload, digest_size=20).digest()
    with _loaded_lock:
        user = _loaded.get(digest)
        if user is not None:
            _loaded.move_to_end(digest)
            return user
    user = cloudpickle.loads(payload)  # outside the lock: unpickling may import and take long
    with _loaded_lock:
        user = _loaded.setdefault(digest, user)  # a thread that unpickled it first wins
        _loaded.move_to_end(digest)
        while len(_loaded) > LOADED_FUNCTIONS_MAX:
            _loaded.popitem(last=False)
    return user


def _load(name: str, payload: bytes, iterate: bool = False,
          guarded: bool = True) -> Callable[..., Any]:
    """The user function of ``payload`` in the worker (unpickled once per worker process,
    ``_unpickled``), wrapped so that its errors name it (``guarded``; a caller that catches
    them around a whole batch itself, ``_failed``, gets the function as it is).

    Raises:
        UserFunctionError: the payload cannot be unpickled here.
    """
    try:
        user = _unpickled(payload)
    except Exception as exc:
        raise UserFunctionError(
            f"user function '{name}' cannot be unpickled in the Spark Python worker: {exc}"
        ) from exc
    if not guarded:
        return user  # type: ignore[no-any-return]

    def guarded_call(*args: Any) -> Any:
        try:
            result = user(*args)
            if iterate:
                return list(result) if result is not None else []
            return result
        except Exception as exc:
            raise _failed(name, exc) from exc

    return guarded_call


def _failed(name: str, exc: Exception) -> UserFunctionError:
    """The error for user function ``name`` raising ``exc``."""
    return UserFunctionError(f"user function '{name}' failed: {type(exc).__name__}: {exc}")


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a batch of rows is built (as it was).

    The rows (tuples, ``Row`` objects) are containers: every 700 of them start a collection,
    which traverses every young container, and those alive through a batch are promoted and
    traversed again by the older generations' collections. Reference counting frees the rows
    either way; only reference cycles wait for the next collection after the batch. Measured
    (the streaming benchmark's event function, batches of 16,384 rows): 1,437 -> 657 ns per
    row to build a batch with the collector paused.
    """
    enabled = gc.isenabled()
    if enabled:
        gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
    items = list(items)
    width = len(names)
    if all(type(item) is tuple and len(item) == width for item in items):
        # plain tuples (what most functions return): transposed at once, ~2x faster per row
        values = list(zip(*items, strict=True)) if items else [()] * width
        return pa.RecordBatch.from_arrays(
            [pa.array(col, type=field.type) for col, field in zip(values, schema, strict=True)],
            schema=schema)
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
            with _cyclic_gc_paused():
                out = _to_batch([user(row) for row in _rows(batch)], out_schema)
            yield out

    return run


def generator_fn(fn: SerializedFunction, out_schema: pa.Schema) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` function applying a ``DataGeneratorSource``'s ``fn(index) -> row`` to the
    indices of slices of its positions: each input row ``(start, end, p, s)`` (bigints) stands
    for positions ``start..end-1``, index ``pos * p + s``; one output batch per slice.

    The worker expands the slices itself: Spark neither generates the indices
    (``explode(sequence(...))``) nor sends them to the worker as Arrow. The indices reach ``fn``
    as Python ints, with no ``Row`` per record (4.0 -> 1.4 us per record for the streaming
    benchmark's event function). The function is called as it is, its errors caught around
    the slice (``_failed``), and the cyclic garbage collector waits while a slice's rows are
    built (``_cyclic_gc_paused``): 1.44 -> 0.73 us per record."""
    name, payload = fn.name, fn.payload

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        user = _load(name, payload, guarded=False)
        for batch in batches:
            for start, end, p, s in zip(*(c.to_pylist() for c in batch.columns), strict=True):
                with _cyclic_gc_paused():
                    try:
                        rows = [user(pos * p + s) for pos in range(start, end)]
                    except Exception as exc:
                        raise _failed(name, exc) from exc
                    out = _to_batch(rows, out_schema)
                yield out

    return run


def flat_map_fn(fn: SerializedFunction, out_schema: pa.Schema) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` function applying ``fn(row) -> iterable of rows``."""
    name, payload = fn.name, fn.payload

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        user = _load(name, payload, iterate=True)
        for batch in batches:
            with _cyclic_gc_paused():
                out: list[Any] = []
                for row in _rows(batch):
                    out.extend(user(row))
                result = _to_batch(out, out_schema)
            yield result

    return run


def filter_fn(fn: SerializedFunction) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` function keeping the rows for which ``fn(row)`` is truthy."""
    name, payload = fn.name, fn.payload

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        user = _load(name, payload)
        for batch in batches:
            with _cyclic_gc_paused():
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
            with _cyclic_gc_paused():
                stamps = pa.array([int(user(row, -(2**63))) for row in _rows(batch)],
                                  type=pa.int64())
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
