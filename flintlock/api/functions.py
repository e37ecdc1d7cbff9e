"""User-function interfaces (PyFlink names) and their conversion to plain callables.

Every operator that takes a function accepts a plain callable or an instance of the matching
interface below; the instance's method is what runs in the task (``MapFunction.map`` etc.).

Call shapes: ``map(row) -> tuple | dict | Row``, ``flat_map(row) -> iterable of rows``,
``filter(row) -> bool``, ``reduce(acc_row, row) -> row``, ``process(key, rows) -> iterable of
rows``, ``map_batches(batch) -> batch`` (pyarrow RecordBatch or pandas DataFrame).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "FilterFunction",
    "FlatMapFunction",
    "Function",
    "KeyedProcessFunction",
    "MapFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "as_callable",
    "function_name",
]


class Function:
    """Base of the user-function interfaces."""


class MapFunction(Function):
    def map(self, value: Any) -> Any:
        raise NotImplementedError


class FlatMapFunction(Function):
    def flat_map(self, value: Any) -> Iterable[Any]:
        raise NotImplementedError


class FilterFunction(Function):
    def filter(self, value: Any) -> bool:
        raise NotImplementedError


class ReduceFunction(Function):
    def reduce(self, value1: Any, value2: Any) -> Any:
        raise NotImplementedError


class KeyedProcessFunction(Function):
    """A function over a keyed stream, in one of two shapes.

    Flink's (STREAMING and BATCH, ``is_stateful``): ``open(runtime_context)`` once per subtask,
    then ``process_element(row, ctx)`` per row (in event-time order within an epoch when the
    stream has event time) and ``on_timer(timestamp, ctx)`` per due timer, each yielding output
    rows; keyed state and timers through ``flintlock.api.state``. ``ctx``: ``get_current_key()``,
    ``timestamp()`` (the row's event time or the timer's time, ms), ``timer_service()``,
    ``time_domain()`` (in ``on_timer``).

    flintlock's batch shape (BATCH only): ``process(key, rows)`` over all rows of one key.
    """

    def open(self, runtime_context: Any) -> None:
        pass

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any] | None:
        return None

    def close(self) -> None:
        pass

    def process(self, key: Any, rows: Iterable[Any]) -> Iterable[Any]:
        raise NotImplementedError

    @property
    def is_stateful(self) -> bool:
        """Whether this implements Flink's ``process_element`` shape."""
        return type(self).process_element is not KeyedProcessFunction.process_element


class ProcessWindowFunction(Function):
    """``process(key, context, elements)`` yields output rows for one fired window;
    ``context.window()`` is its ``TimeWindow`` (Flink ``ProcessWindowFunction``)."""

    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
        raise NotImplementedError


_METHODS: dict[type[Function], str] = {
    MapFunction: "map",
    FlatMapFunction: "flat_map",
    FilterFunction: "filter",
    ReduceFunction: "reduce",
    KeyedProcessFunction: "process",
    ProcessWindowFunction: "process",
}


def as_callable(fn: Any, interface: type[Function], operator: str) -> Callable[..., Any]:
    """``fn`` itself when callable, else the interface method of a ``Function`` instance.

    Raises:
        TypeError: ``fn`` is neither; names the operator and the expected interface.
    """
    if isinstance(fn, interface):
        return getattr(fn, _METHODS[interface])  # type: ignore[no-any-return]
    if callable(fn) and not isinstance(fn, Function):
        return fn  # type: ignore[no-any-return]
    raise TypeError(
        f"{operator}: expected a callable or a {interface.__name__}, got {type(fn).__name__}"
    )


def function_name(fn: Any) -> str:
    """A user function's qualified name (for ``SerializedFunction.name`` and errors)."""
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))
