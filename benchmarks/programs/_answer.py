"""Writing a program's answer and timing for the harness (stdlib + pyarrow only).

The answer goes to an Arrow IPC file (``--result``), so the harness can compare it with DuckDB's;
the in-process timing goes to a JSON file (``--meta``): ``{"job_s": seconds, ...}``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def write_answer(path: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    import pyarrow as pa

    data = {c: [r[i] for r in rows] for i, c in enumerate(columns)}
    table = pa.table(data) if columns else pa.table({})
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def write_meta(path: str, **meta: Any) -> None:
    with open(path, "w") as fh:
        json.dump(meta, fh)
