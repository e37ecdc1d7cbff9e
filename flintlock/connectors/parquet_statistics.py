"""Table statistics of Parquet files from their footers: row count and bytes per column.

What a planner's table statistics give Flink's and Spark's join strategy choice (row count and
average column size, Flink ``TableStats``/``ColumnStats.avgLen``), read from the files' own
metadata instead of an ANALYZE run: ``num_rows`` and each top-level column's
``total_uncompressed_size`` summed over row groups (the size of its values before compression,
close to their in-memory size). Footers only: no data page is read.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow.parquet as pq

from flintlock.connectors.file import FileSplit, _fs_path

__all__ = ["MAX_FOOTERS", "ParquetStatistics", "parquet_statistics"]

log = logging.getLogger(__name__)

#: read at most this many footers for one estimate (each is a round trip on object stores)
MAX_FOOTERS = 256


@dataclass(frozen=True)
class ParquetStatistics:
    """Rows and uncompressed bytes per top-level column (names as in the files) of a file set."""

    rows: int
    column_bytes: dict[str, int]

    def average_bytes(self, column: str) -> float | None:
        """Average uncompressed bytes of ``column`` per row (0 when there are no rows); None for
        a column the files do not have."""
        if column not in self.column_bytes:
            return None
        return self.column_bytes[column] / self.rows if self.rows else 0.0


def parquet_statistics(splits: Sequence[FileSplit]) -> ParquetStatistics | None:
    """The statistics of ``splits`` (Parquet files), or None when there are more than
    ``MAX_FOOTERS`` files or one cannot be read (no estimate; never raises)."""
    if len(splits) > MAX_FOOTERS:
        return None
    rows = 0
    columns: dict[str, int] = {}
    try:
        for split in splits:
            fs, path, _ = _fs_path(split.path)
            with fs.open_input_file(path) as fh:
                meta = pq.ParquetFile(fh).metadata
            rows += meta.num_rows
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                for c in range(group.num_columns):
                    chunk = group.column(c)
                    name = chunk.path_in_schema.split(".", 1)[0]
                    columns[name] = columns.get(name, 0) + chunk.total_uncompressed_size
    except Exception as exc:  # unreadable from the client: no estimate
        log.debug("no Parquet statistics for %d files: %s", len(splits), exc)
        return None
    return ParquetStatistics(rows, columns)
