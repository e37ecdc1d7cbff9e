"""Merging accumulators of the final attempts into the JobResult.

Accumulators are ``name -> bytes``. A name reported by several subtasks is merged: ``collect-*``
accumulators hold Arrow IPC streams and are merged into one stream (tables concatenated in subtask
order) with ``pyarrow``; other values are concatenated bytewise.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

__all__ = ["merge_accumulators"]

log = logging.getLogger(__name__)


def _merge_arrow_streams(parts: list[bytes]) -> bytes:
    import pyarrow as pa

    tables = []
    for part in parts:
        with pa.ipc.open_stream(pa.py_buffer(part)) as reader:
            tables.append(reader.read_all())
    table = pa.concat_tables(tables, promote_options="default")
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def merge_accumulators(results: Iterable[Mapping[str, bytes]]) -> dict[str, bytes]:
    """Merge per-attempt accumulators (given in vertex, then subtask order)."""
    parts: dict[str, list[bytes]] = {}
    for accumulators in results:
        for name, value in accumulators.items():
            parts.setdefault(name, []).append(value)
    merged: dict[str, bytes] = {}
    for name, values in parts.items():
        if len(values) == 1:
            merged[name] = values[0]
            continue
        if name.startswith("collect-"):
            try:
                merged[name] = _merge_arrow_streams(values)
                continue
            except Exception as exc:
                log.warning("accumulator %s: cannot merge as Arrow streams (%s); concatenating", name, exc)
        merged[name] = b"".join(values)
    return merged
