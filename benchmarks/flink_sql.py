"""The workloads in Flink SQL, over CSV copies of the benchmark data (PyFlink's spec files).

PyFlink's pip package ships the ``csv`` and ``json`` formats but not ``parquet`` (that needs the
``flink-sql-parquet`` jar from Maven), so the harness gives Flink CSV copies of the Parquet inputs,
written once by DuckDB under ``.cache/bench-csv/`` (one CSV per Parquet file, so Flink sees as
many splits as the other systems). Flink reads the text of the word count directly, as one-column
CSV with a delimiter that never occurs. Reading CSV costs Flink more than Parquet would; the
report says so.

The TPC-H SQL of all 22 queries is ``examples.tpch.reference``'s, adapted to Flink's dialect:
quoted interval literals (``INTERVAL '90' DAY``), averages over DOUBLE (as every other system
computes them) and the per-query ``EDITS`` (DOUBLE quotients in Q8 and Q14, the reserved word
``value`` quoted in Q11). Flink's batch planner runs every query as written, correlated
subqueries, EXISTS / NOT EXISTS, NOT IN and the WITH view of Q15 included (checked against DuckDB
at SF 0.01), so ``UNSUPPORTED`` (workloads PyFlink skips, with the reason the runner records) is
empty.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from benchmarks.workloads import TPCH, DataPaths
from examples.tpch import reference as tpch_reference

__all__ = ["csv_copy", "flink_spec", "flink_type"]

REPO = Path(__file__).resolve().parents[1]
CSV_CACHE = REPO / ".cache" / "bench-csv"

TPCH_TABLES = {
    "q1": ("lineitem",),
    "q2": ("part", "supplier", "partsupp", "nation", "region"),
    "q3": ("customer", "orders", "lineitem"),
    "q4": ("orders", "lineitem"),
    "q5": ("customer", "orders", "lineitem", "supplier", "nation", "region"),
    "q6": ("lineitem",),
    "q7": ("supplier", "lineitem", "orders", "customer", "nation"),
    "q8": ("part", "supplier", "lineitem", "orders", "customer", "nation", "region"),
    "q9": ("part", "supplier", "lineitem", "partsupp", "orders", "nation"),
    "q10": ("customer", "orders", "lineitem", "nation"),
    "q11": ("partsupp", "supplier", "nation"),
    "q12": ("orders", "lineitem"),
    "q13": ("customer", "orders"),
    "q14": ("lineitem", "part"),
    "q15": ("lineitem", "supplier"),
    "q16": ("partsupp", "part", "supplier"),
    "q17": ("lineitem", "part"),
    "q18": ("customer", "orders", "lineitem"),
    "q19": ("lineitem", "part"),
    "q20": ("supplier", "nation", "partsupp", "part", "lineitem"),
    "q21": ("supplier", "lineitem", "orders", "nation"),
    "q22": ("customer", "orders"),
}

#: Workloads PyFlink does not run, with the reason (recorded in the results' ``skipped``).
UNSUPPORTED: dict[str, str] = {}

WORD_COUNT_SQL = r"""
SELECT word, `count` FROM (
    SELECT word, COUNT(*) AS `count`
    FROM text_lines
    CROSS JOIN UNNEST(SPLIT(REGEXP_REPLACE(LOWER(`line`), '[^a-z'']+', ' '), ' ')) AS T(word)
    WHERE word <> ''
    GROUP BY word
)
ORDER BY `count` DESC, word
LIMIT 20
"""

FLIGHTS_SQL = """
SELECT
    f.carrier,
    a.name,
    f.`month`,
    COUNT(*) AS flights,
    AVG(f.arr_delay) AS mean_arr_delay,
    MAX(f.arr_delay) AS max_arr_delay
FROM flights AS f
LEFT JOIN airlines AS a ON f.carrier = a.carrier
WHERE f.arr_delay IS NOT NULL
GROUP BY f.carrier, a.name, f.`month`
ORDER BY f.carrier, f.`month`
"""


def flink_type(arrow_type: Any) -> str:
    """The Flink SQL type of an Arrow type (columns the queries never read may become STRING)."""
    import pyarrow as pa

    t = arrow_type
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_int32(t) or pa.types.is_int16(t) or pa.types.is_int8(t):
        return "INT"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    if pa.types.is_float64(t) or pa.types.is_float32(t):
        return "DOUBLE"
    if pa.types.is_date(t):
        return "DATE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    return "STRING"  # strings, and timestamps with a zone (read as text; no query uses them)


#: Per-query edits of the reference SQL for Flink: ``[(old text, new text)]``, each must match.
EDITS: dict[str, list[tuple[str, str]]] = {
    # DOUBLE quotients, as DuckDB's (Flink's DECIMAL quotient keeps 6 decimal places)
    "q8": [("sum(CASE WHEN nation = 'BRAZIL' THEN volume ELSE 0 END) / sum(volume)",
            "CAST(sum(CASE WHEN nation = 'BRAZIL' THEN volume ELSE 0 END) AS DOUBLE)"
            " / CAST(sum(volume) AS DOUBLE)")],
    "q14": [("100.00 * sum(", "100.0 * CAST(sum("), ("ELSE 0 END)\n", "ELSE 0 END) AS DOUBLE)\n"),
            ("/ sum(l_extendedprice * (1 - l_discount))",
             "/ CAST(sum(l_extendedprice * (1 - l_discount)) AS DOUBLE)")],
    # VALUE is a reserved word in Flink SQL
    "q11": [("AS value", "AS `value`"), ("ORDER BY value", "ORDER BY `value`")],
}


def flink_query(workload: str) -> str:
    """The Flink SQL text of a workload."""
    if workload == "word_count":
        return WORD_COUNT_SQL
    if workload == "flights":
        return FLIGHTS_SQL
    sql = tpch_reference.QUERIES[workload]
    for old, new in EDITS.get(workload, []):
        if old not in sql:
            raise ValueError(f"{workload}: the reference SQL no longer contains {old!r}")
        sql = sql.replace(old, new)
    sql = re.sub(r"INTERVAL (\d+) (DAY|MONTH|YEAR)", r"INTERVAL '\1' \2", sql)
    return re.sub(r"\bavg\((\w+)\)", r"avg(CAST(\1 AS DOUBLE))", sql)


def csv_copy(parquet_dir: Path, log=print) -> tuple[Path, list[tuple[str, str]]]:  # type: ignore[no-untyped-def]
    """A CSV copy of a directory of Parquet files (cached) and its ``[(column, Flink type)]``.

    The cache key is the directory's absolute path, so regenerated data at the same path must be
    removed from ``.cache/bench-csv`` by hand (or the cache deleted).
    """
    import duckdb
    import pyarrow.parquet as pq

    parquet_dir = parquet_dir.resolve()
    files = sorted(parquet_dir.glob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"no Parquet files in {parquet_dir}")
    schema = pq.read_schema(files[0])
    columns = [(f.name, flink_type(f.type)) for f in schema]
    key = hashlib.sha1(str(parquet_dir).encode()).hexdigest()[:10]
    target = CSV_CACHE / f"{parquet_dir.parent.name}-{parquet_dir.name}-{key}"
    marker = target.parent / f"{target.name}.done"
    if marker.is_file():
        return target, columns
    log(f"writing a CSV copy of {parquet_dir} for PyFlink (once) ...")
    target.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    try:
        for f in files:
            src = f.as_posix().replace("'", "''")
            dst = (target / f"{f.stem}.csv").as_posix().replace("'", "''")
            con.execute(f"COPY (SELECT * FROM read_parquet('{src}')) TO '{dst}' "
                        "(FORMAT CSV, HEADER false)")
    finally:
        con.close()
    marker.write_text(json.dumps({"source": str(parquet_dir), "files": len(files)}) + "\n")
    return target, columns


def _ddl(name: str, columns: list[tuple[str, str]], path: Path, extra: dict[str, str]) -> str:
    cols = ",\n    ".join(f"`{c}` {t}" for c, t in columns)
    options = {"connector": "filesystem", "path": path.resolve().as_uri(), "format": "csv", **extra}
    with_ = ",\n    ".join(f"'{k}' = {v if v.startswith('U&') else repr(v)}"
                           for k, v in options.items())
    return f"CREATE TABLE `{name}` (\n    {cols}\n) WITH (\n    {with_}\n)"


def flink_spec(workload: str, paths: DataPaths, parallelism: int, result: Path, meta: Path,
               log=print) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The spec file content of ``benchmarks/programs/pyflink_job.py`` for one run."""
    ddl = []
    csv_opts = {"csv.null-literal": ""}
    if workload in TPCH:
        for table in TPCH_TABLES[workload]:
            path, columns = csv_copy(paths.tpch / table, log)
            ddl.append(_ddl(table, columns, path, csv_opts))
    elif workload == "flights":
        for table in ("flights", "airlines"):
            path, columns = csv_copy(paths.flights / table, log)
            ddl.append(_ddl(table, columns, path, csv_opts))
    elif workload == "word_count":
        ddl.append(_ddl("text_lines", [("line", "STRING")], paths.text, {
            "csv.field-delimiter": "U&'\\0001'",
            "csv.disable-quote-character": "true",
        }))
    else:
        raise KeyError(f"unknown workload {workload!r}")
    return {"ddl": ddl, "query": flink_query(workload), "parallelism": parallelism,
            "result": str(result), "meta": str(meta)}
