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
    """Processes all rows of one key: ``process(key, rows)`` yields output rows."""

    def process(self, key: Any, rows: Iterable[Any]) -> Iterable[Any]:
        raise NotImplementedError


_METHODS: dict[type[Function], str] = {
    MapFunction: "map",
    FlatMapFunction: "flat_map",
    FilterFunction: "filter",
    ReduceFunction: "reduce",
    KeyedProcessFunction: "process",
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
