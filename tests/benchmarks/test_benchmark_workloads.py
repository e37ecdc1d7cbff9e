"""The benchmark's workload registry, its PySpark and Flink SQL queries, and ``--spark-remote``.

The ``spark`` tests run every TPC-H query of ``benchmarks.pyspark_queries`` on the test session's
Spark Connect session over TPC-H SF 0.01 and check the answer against DuckDB's, with the
benchmark's own check (``benchmarks.verify``): the same check a benchmark run makes, and the
PySpark Connect path that ``--spark-remote`` uses.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import click
import pytest

from benchmarks import flink_sql, pyspark_queries, stats, workloads
from benchmarks.__main__ import _names, _spark_remote
from benchmarks.report import WORKLOAD_TITLES, render_markdown, spark_line
from benchmarks.runner import _not_declined
from benchmarks.spark_target import SparkTarget, check_spec, start_spark
from benchmarks.systems import make_system, system_names
from benchmarks.verify import check_answer
from examples.tpch import QUERY_NAMES
from examples.tpch import reference as tpch_reference

REPO = Path(__file__).resolve().parents[2]
TEST_DATA = REPO / "data" / "test"


def test_all_22_tpch_queries_are_workloads_in_query_order() -> None:
    assert workloads.TPCH == tuple(QUERY_NAMES) == stats.TPCH
    assert workloads.WORKLOADS[:22] == workloads.TPCH
    assert all(q in WORKLOAD_TITLES for q in workloads.TPCH)


@pytest.mark.parametrize("workload", workloads.WORKLOADS)
def test_every_workload_has_a_pyspark_query_and_a_flink_query(workload: str) -> None:
    assert workload in pyspark_queries.QUERIES
    if workload in workloads.TPCH:
        sql = workloads.reference_sql(workload, None)  # type: ignore[arg-type]
        assert sql == tpch_reference.QUERIES[workload]
        assert set(flink_sql.TPCH_TABLES[workload]) <= set(tpch_reference.TABLES)
    if workload not in flink_sql.UNSUPPORTED:
        sql = flink_sql.flink_query(workload)  # the per-query edits still apply
        assert "INTERVAL '" in sql or "INTERVAL" not in sql


def test_flink_sql_tables_are_the_ones_each_query_reads() -> None:
    for q in workloads.TPCH:
        sql = tpch_reference.QUERIES[q].lower()
        used = {t for t in tpch_reference.TABLES
                if any(f"{sep}{t}{end}" in sql for sep in (" ", ",") for end in (" ", ",", "\n"))}
        assert used == set(flink_sql.TPCH_TABLES[q]), q


def test_flink_sql_edits() -> None:
    assert "AS `value`" in flink_sql.flink_query("q11")
    assert "CAST(sum(volume) AS DOUBLE)" in flink_sql.flink_query("q8")
    assert "AS DOUBLE) AS promo_revenue" in flink_sql.flink_query("q14")
    assert "avg(CAST(l_quantity AS DOUBLE))" in flink_sql.flink_query("q17")


@pytest.mark.parametrize("module", ["pyspark_queries", "pyspark_queries_q12_q22",
                                    "pyspark_common"])
def test_pyspark_query_modules_import_only_pyspark(module: str) -> None:
    tree = ast.parse((REPO / "benchmarks" / f"{module}.py").read_text())
    imported = {n.module if isinstance(n, ast.ImportFrom) else a.name
                for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    allowed = {"__future__", "collections.abc", "dataclasses", "typing", "pyspark.sql",
               "benchmarks", "benchmarks.pyspark_common"}
    assert imported <= allowed, imported - allowed


def test_workload_selection_and_tpch_group() -> None:
    allowed = (*workloads.WORKLOADS, "latency")
    assert _names("tpch", allowed, "workloads", {"tpch": workloads.TPCH}) == list(workloads.TPCH)
    assert _names("q6, q1,q6", allowed, "workloads") == ["q6", "q1"]
    with pytest.raises(click.BadParameter, match="q23"):
        _names("q1,q23", allowed, "workloads")


def test_a_system_that_declines_a_workload_is_skipped_with_its_reason() -> None:
    class Sys:
        def __init__(self, reason: str | None) -> None:
            self.reason = reason

        def skip_reason(self, workload: str) -> str | None:
            return self.reason

    doc: dict = {"skipped": []}
    by_name = {"duckdb": Sys(None), "pyflink": Sys("no such SQL")}
    assert _not_declined("q9", ["pyflink", "duckdb"], by_name, doc, lambda _: None) == ["duckdb"]
    assert doc["skipped"] == [{"workload": "q9", "system": "pyflink", "reason": "no such SQL"}]


def test_spark_remote_option() -> None:
    assert _spark_remote(None, ("a=1",)) == (None, ["a=1"])
    assert _spark_remote("standalone", ()) == ("standalone", [])
    # -D spark.remote alone means --spark-remote: plain PySpark uses that Spark too
    assert _spark_remote(None, ("spark.remote=sc://h:1", "a=1")) == ("sc://h:1", ["a=1"])
    assert _spark_remote("sc://h:1", ("spark.remote=sc://h:1",)) == ("sc://h:1", [])
    with pytest.raises(click.BadParameter, match="not a different"):
        _spark_remote("sc://h:1", ("spark.remote=sc://h:2",))
    with pytest.raises(click.BadParameter, match="expected a Spark Connect URL"):
        _spark_remote("local[2]", ())
    assert check_spec(" sc://10.0.0.1:15002 ") == "sc://10.0.0.1:15002"


def test_standalone_systems_are_named_with_their_spark_and_keep_their_own_files(
        tmp_path: Path) -> None:
    assert "flintlock-session@standalone" in system_names()
    assert _names("flintlock-session,pyspark-warm@standalone", system_names(), "systems") == [
        "flintlock-session", "pyspark-warm@standalone"]
    with pytest.raises(click.BadParameter, match="duckdb@standalone"):
        _names("duckdb@standalone", system_names(), "systems")  # DuckDB uses no Spark
    with pytest.raises(ValueError, match="unknown system"):
        make_system("pyflink@standalone", SimpleNamespace(workdir=tmp_path))  # type: ignore[arg-type]
    ctx = SimpleNamespace(workdir=tmp_path)
    local, remote = (make_system(n, ctx) for n in  # type: ignore[arg-type]
                     ("flintlock-session", "flintlock-session@standalone"))
    assert (type(local), local.name, remote.name) == (
        type(remote), "flintlock-session", "flintlock-session@standalone")
    assert local.state != remote.state  # two session clusters in one run
    warm = make_system("pyspark-warm@standalone", ctx)  # type: ignore[arg-type]
    assert warm._log.name == "pyspark-warm@standalone-worker.log"


def test_remote_spark_target_needs_no_process(tmp_path: Path) -> None:
    target = start_spark("sc://127.0.0.1:15002", tmp_path, 2, lambda _: None)
    assert (target.mode, target.remote) == ("remote", "sc://127.0.0.1:15002")
    assert start_spark(None, tmp_path, 2, lambda _: None).remote is None
    target.stop()


def test_report_says_which_spark() -> None:
    base = {"settings": {"sf": 1, "runs": 3, "warmups": 1, "cores": 2}, "measurements": []}
    assert "classic `local[2]`" in spark_line(base)  # results from before --spark-remote
    remote = {**base, "spark": SparkTarget("remote", "sc://h:15002").describe()}
    assert "the Spark Connect server `sc://h:15002` (`--spark-remote`)" in spark_line(remote)
    standalone = {**base, "spark": SparkTarget("standalone", "sc://127.0.0.1:7", info={
        "master": "spark://127.0.0.1:6", "worker_cores": 2, "worker_memory": "4g"}).describe()}
    text = render_markdown(standalone, "x.json")
    assert "a Spark standalone cluster started by the harness" in text
    assert "`spark://127.0.0.1:6`" in text and "`spark.remote=sc://127.0.0.1:7`" in text
    assert "the shared Spark (PySpark Connect)" in text


@pytest.fixture(scope="module")
def tpch_sf001() -> Path:
    from examples.data import generate_tpch

    return generate_tpch(TEST_DATA, 0.01, quiet=True)


@pytest.fixture(scope="module")
def duckdb_con(tpch_sf001: Path):  # type: ignore[no-untyped-def]
    con = tpch_reference.connect(tpch_sf001)
    yield con
    con.close()


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("query", workloads.TPCH)
def test_pyspark_query_equals_duckdb_at_sf001(  # type: ignore[no-untyped-def]
        spark, tpch_sf001: Path, duckdb_con, query: str) -> None:
    paths = SimpleNamespace(tpch=str(tpch_sf001), text="", flights="")
    df = pyspark_queries.QUERIES[query](spark, paths)
    rows = [tuple(r) for r in df.collect()]
    cur = duckdb_con.execute(tpch_reference.QUERIES[query])
    ref = cur.fetchall()
    check_answer(f"pyspark {query}", df.columns, rows, [d[0] for d in cur.description], ref,
                 workloads.sort_keys(query))
