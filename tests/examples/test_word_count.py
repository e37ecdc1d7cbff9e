"""The word count example (Column and Python flat_map variants) compared exactly with DuckDB."""

from __future__ import annotations

import duckdb
import pytest

from examples import word_count
from tests.examples.compare import assert_same_result

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.mark.parametrize("python", [False, True], ids=["columns", "python-flat-map"])
def test_word_count_top20_matches_duckdb(python: bool, env, data_dir: str) -> None:
    cur = duckdb.execute(word_count.reference_sql(data_dir))
    cols, expected = [d[0] for d in cur.description], cur.fetchall()
    assert [r[0] for r in expected[:3]] == ["the", "and", "of"]

    rows = word_count.build(env, data_dir, python=python).execute_and_collect()

    assert_same_result(rows, cols, expected, word_count.SORT_KEYS, what="word count")


def test_split_line_matches_the_column_split() -> None:
    words = [w for (w,) in word_count.split_line({"value": "In the Beginning, God's 1st word--LIGHT!"})]
    assert words == ["in", "the", "beginning", "god's", "st", "word", "light"]
