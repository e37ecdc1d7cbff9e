"""Check a benchmark run's answer against the DuckDB reference; a wrong answer stops the run.

Rules (as the example tests' comparison, ``tests/examples/compare.py``):

- the column names are equal, in order; the row counts are equal;
- the rows are ordered by the workload's ORDER BY (``[(column, descending)]``);
- rows whose ORDER BY keys tie may come in any order, so both sides are matched as multisets
  within that order;
- numbers (int, float, Decimal) are equal within a relative tolerance of 1e-6; other values
  (strings, dates, NULL) exactly.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

__all__ = ["WrongAnswer", "check_answer", "read_answer"]


class WrongAnswer(AssertionError):
    """A system returned a different answer than DuckDB; the message shows the first difference."""


def read_answer(path: str | Path) -> tuple[list[str], list[tuple]]:
    """Columns and rows of an answer written by a benchmark program (Arrow IPC file)."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        table = pa.ipc.open_file(source).read_all()
    cols = table.column_names
    data = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return cols, [tuple(col[r] for col in data) for r in range(table.num_rows)]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)


def _equal(a: Any, b: Any, rel_tol: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if _is_number(a) and _is_number(b):
        if not isinstance(a, float) and not isinstance(b, float):
            return a == b or math.isclose(float(a), float(b), rel_tol=rel_tol)
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return math.isclose(fa, fb, rel_tol=rel_tol)
    if isinstance(a, dt.datetime) and isinstance(b, dt.datetime):
        return a.replace(tzinfo=None) == b.replace(tzinfo=None)
    return bool(a == b)


def _canon(v: Any) -> tuple:
    """A total-order key: NULL < numbers (9 significant digits) < dates < strings."""
    if v is None:
        return (0, 0.0, "")
    if _is_number(v):
        return (1, float(f"{float(v):.9g}"), "")
    if isinstance(v, (dt.date, dt.datetime)):
        return (2, 0.0, v.isoformat())
    return (3, 0.0, str(v))


def _ordered(rows: Sequence[tuple], idx: Sequence[int], desc: Sequence[bool]) -> int | None:
    """Index of the first row out of ORDER BY order, or None."""
    for n in range(1, len(rows)):
        for i, d in zip(idx, desc, strict=True):
            a, b = _canon(rows[n - 1][i]), _canon(rows[n][i])
            if a == b:
                continue
            if (a > b) != d:
                return n
            break
    return None


def check_answer(what: str, cols: Sequence[str], rows: Sequence[tuple],
                 ref_cols: Sequence[str], ref_rows: Sequence[tuple],
                 sort_keys: Sequence[tuple[str, bool]], rel_tol: float = 1e-6) -> None:
    """Raise WrongAnswer unless ``(cols, rows)`` is the reference answer (see the module doc)."""
    if list(cols) != list(ref_cols):
        raise WrongAnswer(f"{what}: columns {list(cols)} != expected {list(ref_cols)}")
    if len(rows) != len(ref_rows):
        raise WrongAnswer(f"{what}: {len(rows)} rows != expected {len(ref_rows)}; "
                          f"first rows {list(rows[:3])} vs expected {list(ref_rows[:3])}")
    idx = [list(cols).index(c) for c, _ in sort_keys]
    desc = [d for _, d in sort_keys]
    bad = _ordered(rows, idx, desc)
    if bad is not None:
        order = ", ".join(f"{c} {'DESC' if d else 'ASC'}" for c, d in sort_keys)
        raise WrongAnswer(f"{what}: rows {bad - 1} and {bad} are not ordered by {order}: "
                          f"{rows[bad - 1]} then {rows[bad]}")

    def key(row: tuple) -> tuple:
        sk = []
        for i, d in zip(idx, desc, strict=True):
            c = _canon(row[i])
            sk.append((-c[0], -c[1], _Rev(c[2])) if d else c)
        return (tuple(sk), tuple(_canon(v) for v in row))

    for n, (a, e) in enumerate(zip(sorted(rows, key=key), sorted(ref_rows, key=key), strict=True)):
        diffs = [f"{c}: {av!r} != {ev!r}" for c, av, ev in zip(cols, a, e, strict=True)
                 if not _equal(av, ev, rel_tol)]
        if diffs:
            raise WrongAnswer(f"{what}: row {n} differs ({'; '.join(diffs)})\n"
                              f"  got      {a}\n  expected {e}")


class _Rev:
    """Reverses the order of a string inside a sort key (descending ORDER BY of text)."""

    __slots__ = ("v",)

    def __init__(self, v: str) -> None:
        self.v = v

    def __lt__(self, other: _Rev) -> bool:
        return other.v < self.v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Rev) and self.v == other.v

    def __hash__(self) -> int:
        return hash(self.v)
