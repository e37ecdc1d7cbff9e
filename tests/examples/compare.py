"""Compare a flintlock result (pyspark Rows) with a reference answer (DuckDB columns + tuples).

- Column names must be equal, in order.
- Numbers (int, float, Decimal) compare with relative tolerance ``rel_tol`` (1e-6); ints and
  Decimals that are equal compare equal exactly; other values (str, date, datetime, None) exactly.
- Order: the actual rows must be sorted by ``sort_keys`` (``[(column, descending)]``, the query's
  ORDER BY); rows whose sort keys tie may come in any order, so both sides are matched as multisets
  within the ORDER BY order.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

Rows = Sequence[Sequence[Any]]


def columns_and_tuples(rows: Iterable[Any]) -> tuple[list[str] | None, list[tuple]]:
    """pyspark Rows (or dicts, or plain tuples) -> (column names or None, value tuples)."""
    cols: list[str] | None = None
    out: list[tuple] = []
    for r in rows:
        if isinstance(r, dict):
            names, values = list(r.keys()), tuple(r.values())
        elif hasattr(r, "__fields__"):
            names, values = list(r.__fields__), tuple(r)
        elif hasattr(r, "asDict"):
            d = r.asDict()
            names, values = list(d.keys()), tuple(d.values())
        else:
            names, values = None, tuple(r)
        if cols is None:
            cols = names
        out.append(values)
    return cols, out


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)


def values_equal(a: Any, b: Any, rel_tol: float = 1e-6) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if _is_number(a) and _is_number(b):
        if not isinstance(a, float) and not isinstance(b, float) and a == b:
            return True
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return math.isclose(fa, fb, rel_tol=rel_tol, abs_tol=0.0)
    if isinstance(a, dt.datetime) and isinstance(b, dt.datetime):
        if (a.tzinfo is None) != (b.tzinfo is None):
            a, b = a.replace(tzinfo=None), b.replace(tzinfo=None)
        return a == b
    return bool(a == b)


def _canon(v: Any) -> tuple:
    """A total-order key for one value (numbers rounded to 9 significant digits)."""
    if v is None:
        return (0,)
    if _is_number(v):
        f = float(v)
        return (1, float(f"{f:.9g}"))
    if isinstance(v, dt.datetime):
        return (2, v.replace(tzinfo=None).isoformat())
    if isinstance(v, dt.date):
        return (2, v.isoformat())
    return (3, str(v))


def _sort_key_fn(idx: list[int], desc: list[bool]):
    def key(row: Sequence[Any]) -> tuple:
        parts = []
        for i, d in zip(idx, desc, strict=True):
            c = _canon(row[i])
            if d:
                # Descending: negate numbers, else invert via a wrapper that sorts in reverse.
                c = (-c[0], -c[1]) if c[0] == 1 else (-c[0], _Rev(c[1:]))
            parts.append(c)
        return tuple(parts)

    return key


class _Rev:
    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: _Rev) -> bool:
        return other.v < self.v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Rev) and self.v == other.v


def _row_key(row: Sequence[Any]) -> tuple:
    return tuple(_canon(v) for v in row)


def _compare_key(a: Any, b: Any) -> int:
    ka, kb = _canon(a), _canon(b)
    if ka < kb:
        return -1
    return 1 if kb < ka else 0


def assert_sorted(cols: Sequence[str], rows: Rows, sort_keys: Sequence[tuple[str, bool]]) -> None:
    idx = [list(cols).index(c) for c, _ in sort_keys]
    for n in range(1, len(rows)):
        prev, cur = rows[n - 1], rows[n]
        for i, (name, desc) in zip(idx, sort_keys, strict=True):
            c = _compare_key(prev[i], cur[i])
            if desc:
                c = -c
            if c < 0:
                break
            if c > 0:
                raise AssertionError(
                    f"rows {n - 1} and {n} are not ordered by {name} {'DESC' if desc else 'ASC'}: "
                    f"{tuple(prev)} then {tuple(cur)}"
                )


def assert_same_result(
    actual: Iterable[Any],
    expected_cols: Sequence[str],
    expected_rows: Rows,
    sort_keys: Sequence[tuple[str, bool]] = (),
    *,
    rel_tol: float = 1e-6,
    what: str = "result",
) -> None:
    """Assert that ``actual`` (pyspark Rows) equals the reference answer; see the module doc."""
    cols, act = columns_and_tuples(actual)
    exp = [tuple(r) for r in expected_rows]
    if cols is not None:
        assert cols == list(expected_cols), f"{what}: columns {cols} != expected {list(expected_cols)}"
    assert len(act) == len(exp), (
        f"{what}: {len(act)} rows != expected {len(exp)}\n"
        f"  actual[:5]={act[:5]}\n  expected[:5]={exp[:5]}"
    )
    if sort_keys:
        assert_sorted(expected_cols, act, sort_keys)
        assert_sorted(expected_cols, exp, sort_keys)
    # Within the ORDER BY, match rows as multisets: order both sides by (sort keys, whole row).
    idx = [list(expected_cols).index(c) for c, _ in sort_keys]
    skey = _sort_key_fn(idx, [d for _, d in sort_keys])

    def full(row: Sequence[Any]) -> tuple:
        return (skey(row), _row_key(row))

    act_sorted, exp_sorted = sorted(act, key=full), sorted(exp, key=full)
    for n, (a, e) in enumerate(zip(act_sorted, exp_sorted, strict=True)):
        bad = [
            (c, av, ev)
            for c, av, ev in zip(expected_cols, a, e, strict=True)
            if not values_equal(av, ev, rel_tol)
        ]
        if bad:
            detail = ", ".join(f"{c}: {av!r} != {ev!r}" for c, av, ev in bad)
            raise AssertionError(f"{what}: row {n} differs ({detail})\n  actual={a}\n  expected={e}")
