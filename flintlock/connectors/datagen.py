"""``DataGeneratorSource``: rows from a generator function of the record index (Flink's datagen).

Follows Flink ``connector/datagen/source/DataGeneratorSource`` (``GeneratorFunction<Long, OUT>``,
``count``, ``RateLimiterStrategy``): record ``i`` is ``generator_function(i)``; subtask ``s`` of
``p`` generates the indices ``s, s + p, s + 2p, ...`` below ``count`` (all of them when ``count``
is None: an unbounded source). The function runs in Spark's Python workers over ``spark.range``
(Arrow-based Python execution), never in the TaskManager process. With a rate limit, each
subtask emits ``rows_per_second / p`` rows per second, paced by wall-clock time since it started.

A record's position in its subtask's sequence is the source's offset (what a checkpoint records).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from flintlock.runtime.operators.specs import SerializedFunction

__all__ = ["DataGeneratorSource", "GeneratorSplit", "RateLimiterStrategy"]


@dataclass(frozen=True)
class RateLimiterStrategy:
    """Records per second over all subtasks; None is no limit (Flink ``RateLimiterStrategy``)."""

    rows_per_second: float | None = None

    @classmethod
    def per_second(cls, rows_per_second: float) -> RateLimiterStrategy:
        """At most ``rows_per_second`` records per second, shared by the subtasks.

        Raises:
            ValueError: not a positive number.
        """
        if not isinstance(rows_per_second, (int, float)) or isinstance(rows_per_second, bool) \
                or not rows_per_second > 0 or math.isinf(rows_per_second):
            raise ValueError(f"rows_per_second must be a positive number, got {rows_per_second!r}")
        return cls(float(rows_per_second))

    @classmethod
    def no_limit(cls) -> RateLimiterStrategy:
        return cls(None)


@dataclass(frozen=True)
class GeneratorSplit:
    """Subtask ``subtask`` of ``parallelism`` generates indices ``subtask + k * parallelism``."""

    subtask: int
    parallelism: int
    count: int | None

    def size(self) -> int | None:
        """How many records this split generates (None: unbounded)."""
        if self.count is None:
            return None
        return max(0, -(-(self.count - self.subtask) // self.parallelism))


class DataGeneratorSource:
    """Records ``generator_function(index)`` for ``index`` in ``0 .. count - 1`` (or forever).

    Args:
        generator_function: ``fn(index: int) -> tuple | dict | Row``; must be picklable
            (cloudpickle), and raises are reported naming it.
        count: how many records (None: unbounded, the job runs until cancelled).
        rate_limiter_strategy: ``RateLimiterStrategy.per_second(n)`` or no limit (default).
        output_type: the records' schema as a Spark DDL string (``"id long, word string"``).

    Raises:
        ValueError: a negative count, or an empty schema.
        TypeError: the function is not callable.
        InvalidProgramException: the function cannot be pickled.
    """

    def __init__(self, generator_function: Any, count: int | None,
                 rate_limiter_strategy: RateLimiterStrategy | None = None,
                 output_type: str = "") -> None:
        from flintlock.api.exceptions import InvalidProgramException
        from flintlock.api.functions import function_name
        from flintlock.graph.user_code import dumps_user_function

        if not callable(generator_function):
            raise TypeError(f"generator_function must be callable, got {generator_function!r}")
        if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
            raise ValueError(f"count must be a non-negative int or None (unbounded), got {count!r}")
        if not isinstance(output_type, str) or not output_type.strip():
            raise ValueError("output_type must be a Spark DDL schema, e.g. 'id long, word string'")
        name = function_name(generator_function)
        try:
            payload = dumps_user_function(generator_function)
        except Exception as exc:
            raise InvalidProgramException(
                f"Cannot serialize the generator function '{name}' of DataGeneratorSource: "
                f"{type(exc).__name__}: {exc}") from exc
        self.function = SerializedFunction(name=name, payload=payload)
        self.count = count
        self.rate = rate_limiter_strategy or RateLimiterStrategy.no_limit()
        self.schema = output_type

    @property
    def bounded(self) -> bool:
        return self.count is not None

    def describe(self) -> str:
        count = "unbounded" if self.count is None else f"{self.count} records"
        rate = "" if self.rate.rows_per_second is None else f", {self.rate.rows_per_second:g}/s"
        return f"DataGenerator Source: {self.function.name} ({count}{rate})"

    def output_schema(self) -> str | None:
        return self.schema

    def enumerate_splits(self, parallelism: int) -> list[list[Any]]:
        if parallelism < 1:
            raise ValueError(f"parallelism must be >= 1, got {parallelism}")
        return [[GeneratorSplit(i, parallelism, self.count)] for i in range(parallelism)]

    def __repr__(self) -> str:
        return f"DataGeneratorSource({self.describe()})"
