"""The data workloads of the benchmark: their inputs, DuckDB reference answers and sort orders.

Workloads: the 22 TPC-H queries ``q1`` ... ``q22`` (``examples/tpch``), ``word_count`` (top 20
words of the King James Bible written ``text_copies`` times; 38 copies are ~30M words) and
``flights`` (the nycflights13 pipeline). Every system computes the same answer; ``reference()``
gives it, computed by DuckDB over the same files with the SQL of ``examples.tpch.reference``,
``examples.word_count.REFERENCE_SQL`` and ``examples.flights.REFERENCE_SQL``.

Inputs are generated on demand (idempotent) by ``examples.data`` under the data root:
``tpch-sf<SF>/``, ``nycflights13/``, ``text-x<N>/`` (``text/`` for one copy).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from examples import data as datagen
from examples import flights as flights_example
from examples import word_count as word_count_example
from examples.tpch import reference as tpch_reference

__all__ = ["TPCH", "WORKLOADS", "DataPaths", "ensure_data", "reference", "reference_sql",
           "sort_keys"]

#: All 22 TPC-H queries, in query order (the programs of ``examples/tpch``, ``QUERY_NAMES`` there).
TPCH = ("q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9", "q10", "q11", "q12", "q13", "q14",
        "q15", "q16", "q17", "q18", "q19", "q20", "q21", "q22")
WORKLOADS = (*TPCH, "word_count", "flights")


@dataclass(frozen=True)
class DataPaths:
    """Absolute input directories of one benchmark run."""

    root: Path
    sf: float
    tpch: Path
    text: Path
    flights: Path
    text_copies: int

    def as_args(self) -> list[str]:
        """Command-line arguments of the benchmark programs (``benchmarks/programs``)."""
        return ["--tpch", str(self.tpch), "--text", str(self.text), "--flights", str(self.flights)]

    def describe(self) -> dict[str, Any]:
        meta = {}
        marker = self.text / datagen.MARKER
        if marker.is_file():
            import json

            meta = json.loads(marker.read_text() or "{}")
        return {"root": str(self.root), "sf": self.sf, "tpch": str(self.tpch),
                "text": str(self.text), "text_copies": self.text_copies,
                "text_words": meta.get("words"), "flights": str(self.flights)}


def ensure_data(root: str | Path, sf: float, text_copies: int,
                log: Callable[[str], None] = print) -> DataPaths:
    """The input directories, generated first where missing (TPC-H SF1 takes ~1 min once)."""
    root = Path(root).resolve()
    t0 = time.perf_counter()
    tpch = datagen.generate_tpch(root, sf, quiet=True)
    flights = datagen.generate_flights(root)
    text = datagen.generate_text(root, copies=text_copies)
    took = time.perf_counter() - t0
    if took > 1:
        log(f"data ready under {root} in {took:.0f} s")
    return DataPaths(root, sf, tpch.resolve(), text.resolve(), flights.resolve(), text_copies)


def reference_sql(workload: str, paths: DataPaths) -> str:
    """The DuckDB SQL of ``workload`` (TPC-H queries expect the views of ``connect()``)."""
    if workload in TPCH:
        return tpch_reference.QUERIES[workload]
    if workload == "word_count":
        return word_count_example.reference_sql(paths.text)
    if workload == "flights":
        return flights_example.reference_sql(paths.flights)
    raise KeyError(f"unknown workload {workload!r}; choose from {', '.join(WORKLOADS)}")


def sort_keys(workload: str) -> list[tuple[str, bool]]:
    """The ORDER BY of the workload's answer as ``[(column, descending)]``."""
    if workload in TPCH:
        return list(tpch_reference.SORT_KEYS[workload])
    if workload == "word_count":
        return list(word_count_example.SORT_KEYS)
    if workload == "flights":
        return list(flights_example.SORT_KEYS)
    raise KeyError(f"unknown workload {workload!r}")


class DuckDB:
    """One in-process DuckDB connection with the TPC-H views of ``paths.tpch``."""

    def __init__(self, paths: DataPaths) -> None:
        self.paths = paths
        self.con = tpch_reference.connect(paths.tpch)

    def run(self, workload: str) -> tuple[list[str], list[tuple], float]:
        """(columns, rows, seconds) of one execution, result fetch included."""
        sql = reference_sql(workload, self.paths)
        t0 = time.perf_counter()
        cur = self.con.execute(sql)
        rows = cur.fetchall()
        took = time.perf_counter() - t0
        return [d[0] for d in cur.description], rows, took

    def close(self) -> None:
        self.con.close()


def reference(db: DuckDB, workload: str) -> tuple[list[str], list[tuple]]:
    cols, rows, _ = db.run(workload)
    return cols, rows
