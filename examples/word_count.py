"""Word count over a real English text (the King James Bible): top 20 words.

Lines are lower-cased and split on runs of characters other than ``a-z`` and the apostrophe; empty
words are dropped. The default path uses Spark Column functions (``explode(split(lower(value)))``),
which run natively; ``--python`` uses a Python ``flat_map`` instead (Arrow-batched Python execution).

    python -m examples.word_count --data data [--python]
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

WORD_SPLIT = "[^a-z']+"
TOP_N = 20

# DuckDB reference over the same files (``{text}``: the directory of .txt files).
REFERENCE_SQL = """
WITH lines AS (
    SELECT unnest(string_split(content, chr(10))) AS value
    FROM read_text('{text}/*.txt')
), words AS (
    SELECT unnest(regexp_split_to_array(lower(value), '[^a-z'']+')) AS word FROM lines
)
SELECT word, count(*) AS count
FROM words
WHERE word <> ''
GROUP BY word
ORDER BY count DESC, word
LIMIT 20
"""
SORT_KEYS = [("count", True), ("word", False)]

_SPLIT = re.compile(WORD_SPLIT)


def text_path(data_dir: str | os.PathLike[str]) -> Path:
    p = Path(data_dir)
    return p if any(p.glob("*.txt")) else p / "text"


def split_line(row: Any) -> Iterator[tuple[str]]:
    """The Python variant: one ``(word,)`` per word of the line."""
    line = row["value"] if isinstance(row, dict) else row[0]
    for word in _SPLIT.split((line or "").lower()):
        if word:
            yield (word,)


def build(env: Any, data_dir: str, python: bool = False) -> Any:
    from flintlock.connectors import FileSource

    lines = env.from_source(FileSource.text(str(text_path(data_dir))), "text")  # column "value"
    if python:
        words = lines.flat_map(split_line, "word string")
    else:
        words = lines.select(
            F.explode(F.split(F.lower(F.col("value")), WORD_SPLIT)).alias("word")
        ).filter(F.col("word") != "")
    return (
        words.key_by("word")
        .agg(F.count(F.lit(1)).alias("count"))
        .sort(F.col("count").desc(), F.col("word"))
        .limit(TOP_N)
    )


def reference_sql(data_dir: str | os.PathLike[str]) -> str:
    return REFERENCE_SQL.format(text=text_path(data_dir).as_posix())


def main(argv: list[str] | None = None) -> int:
    from flintlock import RuntimeExecutionMode, StreamExecutionEnvironment

    p = argparse.ArgumentParser(description="word count: top 20 words")
    p.add_argument("--data", default="data", help="data root or text directory (default ./data)")
    p.add_argument("--python", action="store_true", help="split lines with a Python flat_map")
    args = p.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    t0 = time.perf_counter()
    rows = build(env, args.data, python=args.python).execute_and_collect()
    took = time.perf_counter() - t0
    for row in rows:
        print(row)
    print(f"{len(rows)} rows in {took:.2f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
