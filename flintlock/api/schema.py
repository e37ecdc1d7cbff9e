"""Schemas and rows in the client: Spark DDL <-> Arrow, rows -> Arrow IPC, Arrow IPC -> Rows.

Shapes:
- DDL: ``"word string, n bigint"`` (also ``"a: int"``, ``struct<a:int>``, ``array<t>``,
  ``map<k,v>``, ``decimal(p,s)``, back-quoted names). A PySpark ``StructType`` is accepted wherever a
  DDL string is and converted with ``to_ddl``.
- Arrow IPC: the bytes of one Arrow IPC *stream* (schema + record batches).

Parsing is done here (pure Python) because PySpark's own DDL parser needs a Spark session.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

__all__ = [
    "arrow_schema_from_ddl",
    "ddl_from_arrow_schema",
    "ipc_to_table",
    "rows_to_ipc",
    "table_to_rows",
    "to_ddl",
]

_SIMPLE: dict[str, pa.DataType] = {
    "string": pa.string(),
    "varchar": pa.string(),
    "char": pa.string(),
    "boolean": pa.bool_(),
    "bool": pa.bool_(),
    "tinyint": pa.int8(),
    "byte": pa.int8(),
    "smallint": pa.int16(),
    "short": pa.int16(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "long": pa.int64(),
    "float": pa.float32(),
    "real": pa.float32(),
    "double": pa.float64(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ltz": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "binary": pa.binary(),
    "void": pa.null(),
}


class _Parser:
    """Recursive-descent parser over a DDL string."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, msg: str) -> ValueError:
        return ValueError(f"invalid schema {self.text!r} at position {self.pos}: {msg}")

    def ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch: str) -> None:
        if self.peek() != ch:
            raise self.error(f"expected {ch!r}")
        self.pos += 1

    def ident(self) -> str:
        self.ws()
        if self.peek() == "`":
            end = self.text.find("`", self.pos + 1)
            if end < 0:
                raise self.error("unterminated back-quoted name")
            name = self.text[self.pos + 1 : end]
            self.pos = end + 1
            return name
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] == "_"):
            self.pos += 1
        if start == self.pos:
            raise self.error("expected a name")
        return self.text[start : self.pos]

    def number(self) -> int:
        self.ws()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        if start == self.pos:
            raise self.error("expected a number")
        return int(self.text[start : self.pos])

    def fields(self, close: str) -> list[pa.Field]:
        out: list[pa.Field] = []
        while True:
            name = self.ident()
            if self.peek() == ":":
                self.pos += 1
            dtype = self.dtype()
            nullable = True
            rest = self.text[self.pos :].lstrip().lower()
            if rest.startswith("not null"):
                self.pos = len(self.text) - len(rest) + len("not null")
                nullable = False
            out.append(pa.field(name, dtype, nullable=nullable))
            if self.peek() == ",":
                self.pos += 1
                continue
            if self.peek() == close:
                return out
            raise self.error("expected ',' or the end")

    def dtype(self) -> pa.DataType:
        word = self.ident().lower()
        if word == "array":
            self.expect("<")
            inner = self.dtype()
            self.expect(">")
            return pa.list_(inner)
        if word == "map":
            self.expect("<")
            key = self.dtype()
            self.expect(",")
            value = self.dtype()
            self.expect(">")
            return pa.map_(key, value)
        if word == "struct":
            self.expect("<")
            if self.peek() == ">":
                self.pos += 1
                return pa.struct([])
            fields = self.fields(">")
            self.expect(">")
            return pa.struct(fields)
        if word in ("decimal", "dec", "numeric"):
            precision, scale = 10, 0
            if self.peek() == "(":
                self.pos += 1
                precision = self.number()
                if self.peek() == ",":
                    self.pos += 1
                    scale = self.number()
                self.expect(")")
            return pa.decimal128(precision, scale)
        if word in ("char", "varchar") and self.peek() == "(":
            self.pos += 1
            self.number()
            self.expect(")")
        if word in _SIMPLE:
            return _SIMPLE[word]
        raise self.error(f"unknown type {word!r}")


def to_ddl(schema: Any) -> str:
    """A DDL string for a DDL string, a PySpark ``StructType`` or a ``pyarrow.Schema``.

    Raises:
        TypeError: ``schema`` is none of these.
    """
    if isinstance(schema, str):
        return schema
    if isinstance(schema, pa.Schema):
        return ddl_from_arrow_schema(schema)
    fields = getattr(schema, "fields", None)
    if fields is not None and type(schema).__name__ == "StructType":
        return ", ".join(
            f"`{f.name}` {f.dataType.simpleString()}" + ("" if f.nullable else " NOT NULL")
            for f in fields
        )
    raise TypeError(f"expected a DDL string or a StructType, got {type(schema).__name__}")


def arrow_schema_from_ddl(ddl: str) -> pa.Schema:
    """Parse a DDL string into an Arrow schema (Spark's Arrow type mapping).

    Raises:
        ValueError: the DDL does not parse; names the position.
    """
    text = ddl.strip()
    if text.lower().startswith("struct<") and text.endswith(">"):
        text = text[len("struct<") : -1]
    parser = _Parser(text)
    fields = parser.fields("")
    return pa.schema(fields)


def _ddl_type(t: pa.DataType) -> str:
    for name, simple in _SIMPLE.items():
        if t == simple and name not in ("varchar", "char", "bool", "byte", "short", "long",
                                         "integer", "real", "timestamp_ltz"):
            return name
    if pa.types.is_large_string(t):
        return "string"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"array<{_ddl_type(t.value_type)}>"
    if pa.types.is_map(t):
        return f"map<{_ddl_type(t.key_type)},{_ddl_type(t.item_type)}>"
    if pa.types.is_struct(t):
        inner = ",".join(f"{t.field(i).name}:{_ddl_type(t.field(i).type)}" for i in range(t.num_fields))
        return f"struct<{inner}>"
    raise ValueError(f"Arrow type {t} has no Spark equivalent")


def ddl_from_arrow_schema(schema: pa.Schema) -> str:
    """The DDL string of an Arrow schema."""
    return ", ".join(f"`{f.name}` {_ddl_type(f.type)}" for f in schema)


def _as_dict(row: Any, names: Sequence[str]) -> dict[str, Any]:
    if isinstance(row, dict):
        return row
    as_dict = getattr(row, "asDict", None)
    if callable(as_dict) and getattr(row, "__fields__", None):
        return as_dict(recursive=True)  # type: ignore[no-any-return]
    if isinstance(row, (tuple, list)):
        if len(row) != len(names):
            raise ValueError(f"row {row!r} has {len(row)} values, the schema has {len(names)}")
        return dict(zip(names, row, strict=True))
    if len(names) == 1:
        return {names[0]: row}
    raise TypeError(f"cannot convert {type(row).__name__} to a row (use a tuple, dict or Row)")


def rows_to_ipc(rows: Iterable[Any], schema: Any | None) -> tuple[bytes, str]:
    """Rows (tuples, dicts or Rows) -> (Arrow IPC stream bytes, DDL schema).

    Args:
        rows: the rows.
        schema: DDL string or StructType; None infers it (dicts or Rows only).

    Raises:
        ValueError / TypeError: a row does not fit the schema; ``pyarrow`` errors name the column.
    """
    rows = list(rows)
    if schema is None:
        dicts = [_as_dict(r, ()) for r in rows]
        table = pa.Table.from_pylist(dicts)
        ddl = ddl_from_arrow_schema(table.schema)
    else:
        ddl = to_ddl(schema)
        arrow_schema = arrow_schema_from_ddl(ddl)
        dicts = [_as_dict(r, arrow_schema.names) for r in rows]
        table = pa.Table.from_pylist(dicts, schema=arrow_schema)
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue(), ddl


def ipc_to_table(payloads: Sequence[bytes]) -> pa.Table | None:
    """Concatenate Arrow IPC streams (in the given order); None when there are none."""
    tables = [pa.ipc.open_stream(pa.BufferReader(p)).read_all() for p in payloads]
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="default")


def table_to_rows(table: pa.Table | None) -> list[Any]:
    """An Arrow table -> a list of ``pyspark.sql.Row`` (structs become nested Rows)."""
    from pyspark.sql import Row

    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            return Row(**{k: convert(v) for k, v in value.items()})
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value

    if table is None:
        return []
    return [Row(**{k: convert(v) for k, v in d.items()}) for d in table.to_pylist()]
