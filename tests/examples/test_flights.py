"""The nycflights13 example on the local cluster, compared exactly with DuckDB (result and sink)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from examples import flights
from tests.examples.compare import assert_same_result

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]


def test_flights_matches_duckdb(env, data_dir: str, tmp_path: Path) -> None:
    cur = duckdb.execute(flights.reference_sql(data_dir))
    cols, expected = [d[0] for d in cur.description], cur.fetchall()
    assert len(expected) == 185  # 16 carriers, not all flying every month
    out = tmp_path / "flights-out"

    rows = flights.build(env, data_dir, str(out)).execute_and_collect()

    assert_same_result(rows, cols, expected, flights.SORT_KEYS, what="flights")
    # The FileSink's committed Parquet output holds the same rows (in any order).
    assert flights.has_parquet(out), f"no Parquet files under {out}"
    written = duckdb.execute(
        f"SELECT {', '.join(cols)} FROM read_parquet('{out.as_posix()}/**/*.parquet')"
    ).fetchall()
    assert_same_result(written, cols, expected, [], what="flights sink output")
