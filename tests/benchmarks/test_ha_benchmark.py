"""The HA benchmark's harness without a cluster: DuckDB's answer check on Parquet output, and the
table it writes (the benchmark itself needs a cluster and SF1 data: ``benchmarks/ha_failover.py``)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.ha_failover import Run, is_answer, markdown, reference_answer, summarize

REPO = Path(__file__).resolve().parents[2]


def test_output_is_checked_against_duckdbs_answer(tmp_path: Path) -> None:
    from examples.data import generate_tpch

    data = str(generate_tpch(REPO / "data" / "test", 0.01, quiet=True))
    cols, rows = reference_answer("q3", data)
    assert cols[:2] == ["l_orderkey", "revenue"] and len(rows) == 10
    out = tmp_path / "out"
    out.mkdir()
    half = len(rows) // 2
    for n, part in enumerate((rows[:half], rows[half:])):  # two part files, as a FileSink writes
        table = pa.table({c: [r[i] for r in part] for i, c in enumerate(cols)})
        pq.write_table(table, out / f"part-0000{n}-x.parquet")
    assert is_answer(out, (cols, rows))
    wrong = [(r[0], r[1] + Decimal(1), *r[2:]) if i == 3 else r for i, r in enumerate(rows)]
    assert not is_answer(out, (cols, wrong))
    assert not is_answer(out, (cols, rows[:-1]))


def test_the_table_has_one_row_per_query_and_mode() -> None:
    runs = [Run("q3", mode, n, 6.0, with_kill, 3.0, 0.5, 0.6, 13, rerun, True, True)
            for mode, with_kill, rerun in (("restart", 9.0, 13), ("recovery", 6.6, 7))
            for n in range(3)]
    rows = summarize(runs)
    assert [(r["query"], r["mode"], r["rerun"], r["duckdb"]) for r in rows] == [
        ("q3", "restart", 13, 3), ("q3", "recovery", 7, 3)]
    text = markdown(rows, {"queries": "q3", "data": "d", "parallelism": 2, "kill_text": "50%",
                           "command": "c", "date": "d", "machine": "m", "json": "x.json"})
    assert "| Q3 | recovery | 3 | 6.0 | 6.6 | 1.10x (1.10x) | 0.50 | 0.60 | 7 of 13 | yes | " \
           "3 of 3 |" in text
