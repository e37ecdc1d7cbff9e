"""Column helpers: SQL strings -> Spark Connect Columns, key names, aggregate shorthands.

pyspark is imported lazily (``flintlock`` sets ``SPARK_CONNECT_MODE_ENABLED=1`` first, so the
Columns built here are pure-Python Spark Connect expression trees: picklable, no JVM).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["column_name", "column_references", "is_column", "sort_column",
           "sql_identifier", "to_column"]


def is_column(value: Any) -> bool:
    """Whether ``value`` is a PySpark Column (checked without importing pyspark)."""
    cls = type(value)
    return cls.__name__ == "Column" and cls.__module__.startswith("pyspark.")


def to_column(value: Any, what: str = "expression") -> Any:
    """A Column for ``value``: Columns pass through, strings are parsed with ``F.expr``.

    Raises:
        TypeError: ``value`` is neither a Column nor a string; names ``what``.
    """
    if is_column(value):
        return value
    if isinstance(value, str):
        from pyspark.sql import functions as F

        return F.expr(value)
    raise TypeError(
        f"{what}: expected a pyspark Column or a SQL expression string, got {type(value).__name__}"
    )


def sort_column(value: Any) -> Any:
    """A sort key: a column name (kept as a string) or a Column (e.g. ``F.col("n").desc()``)."""
    if isinstance(value, str) or is_column(value):
        return value
    raise TypeError(f"sort: expected a column name or a Column, got {type(value).__name__}")


def column_name(value: Any) -> str | None:
    """The output name of a Column when it is a plain reference or carries an alias, else None."""
    expr = getattr(value, "_expr", None)
    kind = type(expr).__name__
    if kind == "ColumnAlias":
        alias = getattr(expr, "_alias", None)
        if alias and len(alias) == 1:
            return str(alias[0])
    if kind == "ColumnReference":
        return str(expr._unparsed_identifier)  # type: ignore[union-attr]
    return None


def column_references(value: Any) -> frozenset[str] | None:
    """The input column names a Column (or a column name string) reads, or None when they cannot
    be known on the client (a SQL string expression, ``*``, an unknown expression kind).

    Names are top-level: a reference to ``a.b`` reads ``a``. Walks the Spark Connect expression
    tree (PySpark 4.3.0 internals, as ``column_name`` does).
    """
    if isinstance(value, str):
        return None if value.strip() in ("*", "") else frozenset({_top_level(value)})
    expr = getattr(value, "_expr", None)
    if expr is None:
        return None
    if (name := sql_identifier(value)) is not None:
        return frozenset({name})
    refs: set[str] = set()
    return frozenset(refs) if _collect_references(expr, refs) else None


def _top_level(identifier: str) -> str:
    name = identifier.strip()
    if name.startswith("`"):
        end = name.find("`", 1)
        return name[1:end] if end > 0 else name.strip("`")
    return name.split(".", 1)[0]


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|`[^`]+`")


def sql_identifier(value: Any) -> str | None:
    """The column a SQL-string Column (``F.expr("name")``, what ``select("name")`` builds) names
    when the string is a plain identifier, else None."""
    expr = getattr(value, "_expr", None)
    text = getattr(expr, "_expr", None) if type(expr).__name__ == "SQLExpression" else None
    if isinstance(text, str) and _IDENTIFIER.fullmatch(text.strip()):
        return _top_level(text)
    return None


_OPAQUE = frozenset({"SQLExpression", "UnresolvedStar", "UnresolvedRegex", "PythonUDF",
                     "CommonInlineUserDefinedFunction"})


def _counts_rows(expr: Any) -> bool:
    """``count(*)``: a non-distinct count whose one argument is an unqualified star."""
    args: tuple[Any, ...] = getattr(expr, "_args", None) or ()
    return (getattr(expr, "_name", None) == "count" and not getattr(expr, "_is_distinct", False)
            and len(args) == 1 and type(args[0]).__name__ == "UnresolvedStar"
            and getattr(args[0], "_unparsed_target", None) is None)


def _collect_references(expr: Any, refs: set[str]) -> bool:
    """Add the column names ``expr`` reads to ``refs``; False when they cannot be known."""
    kind = type(expr).__name__
    if kind == "ColumnReference":
        refs.add(_top_level(str(expr._unparsed_identifier)))
        return True
    if kind == "UnresolvedFunction" and _counts_rows(expr):
        return True  # count(*) reads no column (Spark plans it as count(1))
    if kind in _OPAQUE:
        return False
    stack = list(vars(expr).values())
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif type(item).__module__ == "pyspark.sql.connect.expressions" and hasattr(item, "to_plan"):
            if not _collect_references(item, refs):
                return False
        elif type(item).__name__ == "Column" and hasattr(item, "_expr"):
            if not _collect_references(item._expr, refs):
                return False
    return True
