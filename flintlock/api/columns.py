"""Column helpers: SQL strings -> Spark Connect Columns, key names, aggregate shorthands.

pyspark is imported lazily (``flintlock`` sets ``SPARK_CONNECT_MODE_ENABLED=1`` first, so the
Columns built here are pure-Python Spark Connect expression trees: picklable, no JVM).
"""

from __future__ import annotations

from typing import Any

__all__ = ["column_name", "is_column", "sort_column", "to_column"]


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
