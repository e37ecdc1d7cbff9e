"""Two-phase (local/global) aggregation: split aggregate Columns into partial and merge columns.

A keyed (or global) aggregation whose functions are decomposable runs in two phases, as Flink's
planner does (``LocalGroupAggregate`` before the exchange, ``GlobalGroupAggregate`` after it;
``table.optimizer.agg-phase-strategy``): the producer vertex computes one partial row per key of
its own input and writes only those rows into the HASH exchange; the consumer merges the partial
rows of each key and evaluates the final expressions. Spark itself plans every aggregation this way
inside one job (partial ``HashAggregate`` -> shuffle -> final ``HashAggregate``).

Decomposable (``DECOMPOSABLE``), and how each call is split (partial columns -> merge):

- ``sum(x)`` -> ``sum(x)`` -> ``sum``; a DECIMAL sum is cast back to the partial's type, which is
  Spark's one-phase result type (``decimal(min(38, p + 10), s)``).
- ``count(...)`` / ``count_if(c)`` -> same call -> ``coalesce(sum, 0)`` (BIGINT NOT NULL, as count).
- ``min``/``max``/``bool_and``/``every``/``bool_or``/``some`` -> same call -> same call.
- ``avg(x)`` / ``mean(x)`` -> ``sum``, ``count`` (and, for DECIMAL ``x``, a typed NULL column that
  carries ``x``'s type to the consumer) -> Spark 4's own ``Average`` evaluation: DECIMAL(p, s):
  ``sum / count`` rounded HALF_UP at scale s + 4 (``try_divide`` of the sum as DECIMAL(34, s) by
  the count as DECIMAL(20, 0), whose result type has exactly that scale, then cast to
  ``decimal(p + 4, s + 4)``); intervals: ``sum / count``; anything else: the sum of
  ``cast(x as double)`` divided by the count.

The local phase learns the ``avg`` argument types at run time; when one has no exact split
(``avg_form``: a DECIMAL with s < 2 or p > 24, or a type ``avg`` does not average), it passes its
rows on unchanged and the global phase, seeing no partial columns, aggregates them in one phase.

An aggregate Column can be decomposed when it carries a name (``.alias(...)``; Spark's generated
names cannot be reproduced client-side), contains no SQL string (``F.expr``), no DISTINCT call and
no window, and every function outside the aggregate calls is a known scalar function
(``SCALAR_FUNCTIONS``: arithmetic, comparisons, ``round``, ``coalesce``, ``when``...), so an unknown
function is never mistaken for a scalar one. Arguments of an aggregate call may be any expression:
the local phase evaluates them on the same rows the one-phase aggregation would have seen.

Shapes: ``plan_two_phase`` works on Spark Connect expression trees (pure Python, no JVM); its result
is deterministic, so the client (deciding, naming the operators) and the Task (building the
DataFrame columns) compute the same plan from the same pickled Columns. Partial columns are named
``__flintlock_p<i>_<part>`` (``v`` value, ``s`` sum, ``c`` count, ``t`` type).

Uses PySpark 4.3.0 Connect internals (``Column._expr`` and the expression classes of
``pyspark.sql.connect.expressions``), as ``flintlock.api.columns`` does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DECOMPOSABLE",
    "SCALAR_FUNCTIONS",
    "AggregateCall",
    "TwoPhasePlan",
    "avg_arguments",
    "avg_form",
    "local_columns",
    "merge_columns",
    "plan_two_phase",
]

#: Aggregate function (as Spark Connect names it) -> canonical kind.
DECOMPOSABLE: dict[str, str] = {
    "sum": "sum", "count": "count", "count_if": "count",
    "min": "min", "max": "max",
    "avg": "avg", "mean": "avg",
    "bool_and": "bool_and", "every": "bool_and",
    "bool_or": "bool_or", "some": "bool_or", "any": "bool_or",
}

#: Functions known to be scalar (allowed around aggregate calls in an aggregate Column).
SCALAR_FUNCTIONS = frozenset({
    "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "<=>", "and", "or", "not",
    "negative", "positive", "abs", "round", "bround", "ceil", "ceiling", "floor", "sqrt", "cbrt",
    "exp", "ln", "log", "log10", "log2", "pow", "power", "pmod", "div", "signum", "sign",
    "coalesce", "nvl", "nvl2", "ifnull", "nullif", "greatest", "least", "when", "if",
    "isnull", "isNull", "isnotnull", "isNotNull", "isnan", "try_divide", "try_add",
    "try_subtract", "try_multiply", "concat", "concat_ws", "upper", "lower", "format_number",
    "to_char", "date_add", "date_sub", "datediff", "in",
})

_PREFIX = "__flintlock_p"


@dataclass(frozen=True)
class AggregateCall:
    """One decomposable aggregate call found in the aggregate Columns.

    Attributes:
        index: position among the plan's calls (names its partial columns).
        kind: canonical kind (``DECOMPOSABLE`` values).
        function: the function name as written (``count_if``, ``every``...).
        args: the call's argument expressions (Spark Connect ``Expression``s).
    """

    index: int
    kind: str
    function: str
    args: tuple[Any, ...]

    def column(self, part: str) -> str:
        """The name of this call's partial column ``part`` (``v``, ``s``, ``c``, ``t``)."""
        return f"{_PREFIX}{self.index}_{part}"


@dataclass(frozen=True)
class TwoPhasePlan:
    """How a list of aggregate Columns splits into partial calls and final expressions.

    Attributes:
        names: the output name of each aggregate Column, in order.
        calls: the aggregate calls, in order of appearance (one per call expression object: two
            calls that only look alike, ``sum(lit(1))`` and ``sum(lit('1'))``, stay apart).
    """

    names: tuple[str, ...]
    calls: tuple[AggregateCall, ...]
    _exprs: tuple[Any, ...]
    _keys: Mapping[int, int]


def _expr_module() -> Any:
    from pyspark.sql.connect import expressions as E

    return E


def _call_key(expr: Any) -> int:
    """Calls are told apart by identity; the plan lives as long as the Columns it was made from."""
    return id(expr)


class _NotDecomposable(Exception):
    pass


def plan_two_phase(aggregates: Sequence[Any]) -> tuple[TwoPhasePlan | None, str]:
    """The two-phase plan of ``aggregates`` (PySpark Columns), or ``(None, reason)``.

    Returns:
        ``(plan, "")`` when every Column can be decomposed, else ``(None, why not)``.
    """
    E = _expr_module()
    names: list[str] = []
    exprs: list[Any] = []
    calls: list[AggregateCall] = []
    keys: dict[int, int] = {}

    def visit(expr: Any, inside_call: bool) -> None:
        if isinstance(expr, E.UnresolvedFunction):
            kind = DECOMPOSABLE.get(expr._name)
            if kind is not None and not inside_call:
                if expr._is_distinct:
                    raise _NotDecomposable(f"{expr!r} is DISTINCT")
                for arg in expr._args:
                    visit(arg, True)
                key = _call_key(expr)
                if key not in keys:
                    keys[key] = len(calls)
                    calls.append(AggregateCall(len(calls), kind, expr._name, tuple(expr._args)))
                return
            if not inside_call and expr._name not in SCALAR_FUNCTIONS:
                raise _NotDecomposable(f"{expr._name}() is not a known decomposable aggregate "
                                       "or scalar function")
            for arg in expr._args:
                visit(arg, inside_call)
            return
        if isinstance(expr, (E.SQLExpression, E.WindowExpression)):
            raise _NotDecomposable(f"{type(expr).__name__} {expr!r} cannot be analysed")
        if not inside_call and not isinstance(
            expr, (E.CastExpression, E.CaseWhen, E.LiteralExpression, E.ColumnReference)
        ):
            raise _NotDecomposable(f"{type(expr).__name__} {expr!r} outside an aggregate call")
        for child in expr.children:
            visit(child, inside_call)

    for col in aggregates:
        expr = getattr(col, "_expr", None)
        if expr is None:
            return None, f"{col!r} is not a Spark Connect Column"
        if not isinstance(expr, E.ColumnAlias) or len(expr._alias) != 1:
            return None, f"{expr!r} has no name (give it one with .alias(...))"
        try:
            visit(expr._child, False)
        except _NotDecomposable as exc:
            return None, str(exc)
        names.append(str(expr._alias[0]))
        exprs.append(expr._child)
    if not calls:
        return None, "no aggregate calls"
    return TwoPhasePlan(tuple(names), tuple(calls), tuple(exprs), dict(keys)), ""


def avg_arguments(plan: TwoPhasePlan) -> list[tuple[AggregateCall, Any]]:
    """``(call, argument Column)`` of every ``avg`` call (the local phase needs their types)."""
    from pyspark.sql.connect.column import Column

    return [(c, Column(c.args[0]).alias(c.column("arg"))) for c in plan.calls if c.kind == "avg"]


def local_columns(plan: TwoPhasePlan, avg_types: Mapping[int, Any]) -> list[Any] | None:
    """The partial aggregate Columns of the local phase, or None to pass the rows on unchanged.

    None when an ``avg`` argument's type has no exact two-phase form (see ``exact_avg_type``);
    the global phase then sees raw rows and aggregates them in one phase.

    Args:
        plan: from ``plan_two_phase``.
        avg_types: call index -> Spark ``DataType`` of the ``avg`` call's argument.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.connect.column import Column
    from pyspark.sql.types import DecimalType

    E = _expr_module()
    cols: list[Any] = []
    for c in plan.calls:
        if c.kind == "avg":
            arg = Column(c.args[0])
            t = avg_types[c.index]
            how = avg_form(t)
            if how is None:
                return None
            cols.append(F.sum(arg if how != "double" else arg.cast("double")).alias(c.column("s")))
            cols.append(F.count(arg).alias(c.column("c")))
            if isinstance(t, DecimalType):
                cols.append(F.lit(None).cast(t).alias(c.column("t")))
        else:
            call = E.UnresolvedFunction(c.function, list(c.args))
            cols.append(Column(call).alias(c.column("v")))
    return cols


def avg_form(t: Any) -> str | None:
    """How ``avg`` over type ``t`` is split: ``decimal``, ``interval``, ``double`` or None.

    Spark 4 evaluates a DECIMAL(p, s) average as ``sum / count`` rounded HALF_UP to scale s + 4
    (``DecimalDivideWithOverflowCheck``). The global phase reproduces that with a division whose
    result type has exactly that scale, which Spark's decimal precision rules allow when s >= 2
    and p <= 24 (the sum fits DECIMAL(34, s)); other DECIMALs, and types Spark's ``avg`` does not
    take as numbers, get None (one-phase aggregation).
    """
    from pyspark.sql.types import (
        DayTimeIntervalType,
        DecimalType,
        NullType,
        NumericType,
        StringType,
        YearMonthIntervalType,
    )

    if isinstance(t, DecimalType):
        return "decimal" if t.scale >= 2 and t.precision <= 24 else None
    if isinstance(t, (YearMonthIntervalType, DayTimeIntervalType)):
        return "interval"
    if isinstance(t, (NumericType, StringType, NullType)):
        return "double"
    return None


def merge_columns(plan: TwoPhasePlan, input_types: Mapping[str, str]) -> list[Any] | None:
    """The final aggregate Columns of the global phase (same names and types as one phase).

    Args:
        plan: from ``plan_two_phase``.
        input_types: column name -> type of the global phase's input, as Spark's
            ``DataType.simpleString()`` (``"decimal(25,2)"``, ``"bigint"``).

    Returns:
        The Columns, or None when the input holds raw rows (the local phase passed them on), so
        the caller aggregates them with the original Columns.
    """
    from pyspark.sql.connect.column import Column

    if plan.calls and plan.calls[0].column("s" if plan.calls[0].kind == "avg" else "v") \
            not in input_types:
        return None
    merged = {c.index: _merge(c, input_types)._expr for c in plan.calls}
    out = []
    for name, expr in zip(plan.names, plan._exprs, strict=True):
        rewritten = _rewrite(expr, lambda e: _lookup(e, plan, merged))
        out.append(Column(rewritten).alias(name))
    return out


def _lookup(expr: Any, plan: TwoPhasePlan, merged: Mapping[int, Any]) -> Any | None:
    name = getattr(expr, "_name", None)
    if not isinstance(name, str) or name not in DECOMPOSABLE:
        return None
    index = plan._keys.get(_call_key(expr))
    return None if index is None else merged[index]


_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


def _decimal(type_text: str | None) -> tuple[int, int] | None:
    m = _DECIMAL.match((type_text or "").strip().lower())
    return (int(m.group(1)), int(m.group(2))) if m else None


def _merge(c: AggregateCall, types: Mapping[str, str]) -> Any:
    from pyspark.sql import functions as F

    if c.kind == "avg":
        total, count = F.sum(F.col(c.column("s"))), F.sum(F.col(c.column("c")))
        arg = _decimal(types.get(c.column("t")))
        if arg is not None:
            p, s = arg
            quotient = F.try_divide(total.cast(f"decimal(34,{s})"), count.cast("decimal(20,0)"))
            return quotient.cast(f"decimal({min(38, p + 4)},{min(38, s + 4)})")
        if types.get(c.column("s"), "").strip().lower().startswith("interval"):
            return F.when(count > 0, total / count)
        return F.try_divide(total, count.cast("double"))
    v = F.col(c.column("v"))
    if c.kind == "sum":
        d = _decimal(types.get(c.column("v")))
        return F.sum(v).cast(f"decimal({d[0]},{d[1]})") if d is not None else F.sum(v)
    if c.kind == "count":
        return F.coalesce(F.sum(v), F.lit(0).cast("bigint"))
    return getattr(F, c.kind)(v)


def _rewrite(expr: Any, replace: Callable[[Any], Any | None]) -> Any:
    """A copy of ``expr`` with every node for which ``replace`` returns an expression replaced."""
    E = _expr_module()
    hit = replace(expr)
    if hit is not None:
        return hit
    if isinstance(expr, E.UnresolvedFunction):
        return E.UnresolvedFunction(expr._name, [_rewrite(a, replace) for a in expr._args],
                                    expr._is_distinct)
    if isinstance(expr, E.CastExpression):
        return E.CastExpression(_rewrite(expr._expr, replace), expr._data_type, expr._eval_mode)
    if isinstance(expr, E.CaseWhen):
        branches = [(_rewrite(c, replace), _rewrite(v, replace)) for c, v in expr._branches]
        other = None if expr._else_value is None else _rewrite(expr._else_value, replace)
        return E.CaseWhen(branches, other)
    return expr
