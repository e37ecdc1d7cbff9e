"""Keyed functions whose correct output is known in closed form, for exactly-once tests.

``RunningCount`` emits ``(key, n)`` for the n-th row of each key (a ``ValueState``): over rows
that reach it in order, the output is exactly ``(k, 1..count(k))`` for every key, so a lost,
duplicated or wrongly restored row shows as a missing, repeated or shifted count.
"""

from __future__ import annotations

from typing import Any

from flintlock.api.functions import KeyedProcessFunction
from flintlock.api.state import ValueStateDescriptor

__all__ = ["RunningCount"]


class RunningCount(KeyedProcessFunction):
    """Emits (key, how many rows of that key so far) for every row; output schema
    ``"<key column> <type>, n long"``."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield (ctx.get_current_key(), n)
