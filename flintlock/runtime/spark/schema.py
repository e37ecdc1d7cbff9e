"""Schema helpers: Spark StructType <-> DDL text, cached DDL parsing, Arrow schemas.

Parsing a DDL string needs the Spark Connect server (one round trip); results are cached per
process because the same vertex's tasks parse the same schemas again and again.
"""

from __future__ import annotations

import json
import threading
from typing import Any

__all__ = ["arrow_schema", "ddl_field_types", "parse_ddl", "struct_from_json", "struct_to_ddl",
           "to_arrow"]

_cache: dict[str, Any] = {}
_cache_lock = threading.Lock()


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def struct_to_ddl(struct: Any) -> str:
    """``StructType`` -> ``"`a` int NOT NULL, `b` string"`` (parseable by Spark's DDL parser)."""
    parts = []
    for f in struct.fields:
        text = f"{_quote(f.name)} {f.dataType.simpleString()}"
        if not f.nullable:
            text += " NOT NULL"
        parts.append(text)
    return ", ".join(parts)


def ddl_field_types(ddl: str) -> dict[str, str]:
    """Field name -> type text of a ``struct_to_ddl`` string, parsed locally (no round trip).

    ``"`a` int NOT NULL, `b` decimal(25,2)"`` -> ``{"a": "int", "b": "decimal(25,2)"}``; commas
    inside a type's parentheses or angle brackets do not split fields.
    """
    out: dict[str, str] = {}
    i, n = 0, len(ddl)
    while i < n:
        while i < n and ddl[i] in " ,":
            i += 1
        if i >= n:
            break
        if ddl[i] == "`":  # quoted name; `` is an escaped backquote
            j, name = i + 1, []
            while j < n:
                if ddl[j] == "`" and ddl[j + 1:j + 2] == "`":
                    name.append("`")
                    j += 2
                elif ddl[j] == "`":
                    break
                else:
                    name.append(ddl[j])
                    j += 1
            field, i = "".join(name), j + 1
        else:
            j = ddl.index(" ", i)
            field, i = ddl[i:j], j
        depth, j = 0, i
        while j < n and not (ddl[j] == "," and depth == 0):
            depth += ddl[j] in "(<"
            depth -= ddl[j] in ")>"
            j += 1
        text = ddl[i:j].strip()
        if text.upper().endswith(" NOT NULL"):
            text = text[: -len(" NOT NULL")].rstrip()
        out[field] = text
        i = j + 1
    return out


def struct_from_json(text: str) -> Any:
    """The StructType Spark stores in Parquet footers (JSON) -> ``StructType``."""
    from pyspark.sql.types import StructType

    return StructType.fromJson(json.loads(text))


def parse_ddl(session: Any, ddl: str) -> Any:
    """DDL string -> ``StructType`` (cached; one server round trip on a miss)."""
    with _cache_lock:
        hit = _cache.get(ddl)
    if hit is not None:
        return hit
    from pyspark.sql.types import StructType

    parsed = session._parse_ddl(ddl)
    if not isinstance(parsed, StructType):
        from pyspark.sql.types import StructField

        parsed = StructType([StructField("value", parsed, True)])
    with _cache_lock:
        _cache[ddl] = parsed
    return parsed


def arrow_schema(struct: Any) -> Any:
    """``StructType`` -> ``pyarrow.Schema`` as Spark's Arrow Python runners expect it."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(struct, timezone="UTC")


def to_arrow(df: Any) -> Any:
    """``df.toArrow()`` (one Spark job) without its schema round trip.

    Spark Connect's ``toArrow`` first asks the server for the schema (an AnalyzePlan request,
    25-70 ms measured here for a subtask's plan) to type the table, although the execute response
    carries the same schema. This types the table from the response, as ``toArrow`` would; it
    asks for the schema only when the response has none, and is ``toArrow`` itself for a
    DataFrame that is not a Connect one.

    Returns:
        A ``pyarrow.Table`` typed as ``toArrow`` types it (timestamps in UTC).
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    to_table = getattr(df, "_to_table", None)
    if to_table is None:
        return df.toArrow()
    table, schema = to_table()
    if schema is None:
        schema = df.schema
    return table.cast(to_arrow_schema(schema, error_on_duplicated_field_names_in_struct=True,
                                      timezone="UTC"))
