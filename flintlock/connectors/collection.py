"""In-memory sources: an Arrow table (``CollectionSource``) and a number range (``SequenceSource``).

Both split by row ranges on the JobMaster (pure pyarrow); the Task reads its ranges with
``spark.createDataFrame`` (Arrow slice) or ``spark.range`` (``flintlock.runtime.spark``).
Follows Flink's ``FromElementsSource`` / ``NumberSequenceSource`` (one split per subtask).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

__all__ = ["CollectionSource", "RowRangeSplit", "SequenceSource"]


@dataclass(frozen=True)
class RowRangeSplit:
    """Rows ``[start, end)`` of a collection or numbers ``[start, end)`` of a sequence."""

    start: int
    end: int


def _ranges(start: int, end_exclusive: int, parallelism: int) -> list[list[Any]]:
    """Split ``[start, end_exclusive)`` into ``parallelism`` contiguous ranges (empty ones omitted)."""
    if parallelism < 1:
        raise ValueError(f"parallelism must be >= 1, got {parallelism}")
    total = max(0, end_exclusive - start)
    out: list[list[Any]] = []
    for i in range(parallelism):
        lo = start + total * i // parallelism
        hi = start + total * (i + 1) // parallelism
        out.append([RowRangeSplit(lo, hi)] if hi > lo else [])
    return out


class CollectionSource:
    """Rows given by the program, as an Arrow IPC stream plus their Spark DDL schema.

    Args:
        arrow_ipc: an Arrow IPC *stream* holding the rows.
        schema_ddl: the rows' schema (``"word string, n bigint"``).
    """

    def __init__(self, arrow_ipc: bytes, schema_ddl: str) -> None:
        self.arrow_ipc = bytes(arrow_ipc)
        self.schema_ddl = schema_ddl

    def table(self) -> pa.Table:
        return pa.ipc.open_stream(self.arrow_ipc).read_all()

    def describe(self) -> str:
        return f"Collection Source ({self.table().num_rows} rows)"

    def output_schema(self) -> str | None:
        return self.schema_ddl

    def enumerate_splits(self, parallelism: int) -> list[list[Any]]:
        return _ranges(0, self.table().num_rows, parallelism)

    def __repr__(self) -> str:
        return f"CollectionSource({len(self.arrow_ipc)} bytes, {self.schema_ddl!r})"


class SequenceSource:
    """The numbers ``start .. end_inclusive`` as column ``id bigint``."""

    def __init__(self, start: int, end_inclusive: int) -> None:
        self.start = int(start)
        self.end_inclusive = int(end_inclusive)

    def describe(self) -> str:
        return f"Sequence Source [{self.start}, {self.end_inclusive}]"

    def output_schema(self) -> str | None:
        return "id bigint"

    def enumerate_splits(self, parallelism: int) -> list[list[Any]]:
        return _ranges(self.start, self.end_inclusive + 1, parallelism)

    def __repr__(self) -> str:
        return f"SequenceSource({self.start}, {self.end_inclusive})"
