"""Adaptive joins end to end: the AdaptiveBatchScheduler turns a hash join into a broadcast join
when a side turns out small, and splits a skewed key's subpartition across subtasks (Flink
FLIP-470), on the local cluster with Spark; results checked against DuckDB and the decision
read from the job's plan (``operator_strategy``), as REST and the web UI show it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.connectors import FileSink, FileSource

pytestmark = [pytest.mark.spark]

RUNTIME_ONLY = {"table.optimizer.adaptive-broadcast-join.strategy": "RUNTIME_ONLY"}
#: every job sets all the keys: the tests' local cluster is shared, and its configuration is the
#: first job's, under each job's own
DEFAULTS = {
    "table.optimizer.adaptive-broadcast-join.strategy": "AUTO",
    "table.optimizer.join.broadcast-threshold": "1m",
    "table.optimizer.skewed-join-optimization.strategy": "AUTO",
    "table.optimizer.skewed-join-optimization.skewed-factor": "4",
    "table.optimizer.skewed-join-optimization.skewed-threshold": "256m",
    "table.optimizer.runtime-filter.enabled": "false",
    # several subtasks per vertex, as on a cluster of several Spark servers (local mode's one
    # server would size every automatically sized vertex at 1)
    "execution.batch.adaptive.auto-parallelism.max-parallelism": "4",
    "execution.batch.adaptive.auto-parallelism.default-source-parallelism": "4",
}


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """facts (4 files, 40,000 rows, 60% of them with key 0) and dims (1 file, 50 keys)."""
    root = tmp_path_factory.mktemp("adaptive-join")
    n = 40_000
    facts = pa.table({
        "f_key": pa.array([0 if i % 5 < 3 else i % 50 for i in range(n)], pa.int64()),
        "f_value": pa.array([(i * 37) % 1000 for i in range(n)], pa.int64()),
        "f_note": pa.array([f"fact number {i} with some text" for i in range(n)], pa.string()),
    })
    dims = pa.table({"d_key": pa.array(range(50), pa.int64()),
                     "d_name": pa.array([f"dim-{k}" for k in range(50)], pa.string())})
    (root / "facts").mkdir()
    (root / "dims").mkdir()
    for p in range(4):
        pq.write_table(facts.slice(p * n // 4, n // 4), root / "facts" / f"part-{p}.parquet")
    pq.write_table(dims, root / "dims" / "part-0.parquet")
    return {"facts": str(root / "facts"), "dims": str(root / "dims")}


def _run(tables: dict[str, str], out: Path, conf: dict[str, str]) -> dict[str, Any]:
    """dims filtered by a Python function (no compile-time size estimate) joined with facts,
    summed per dim name into ``out``; returns the join node of the finished job's plan."""
    env = StreamExecutionEnvironment.get_execution_environment(Configuration({
        "local.number-taskmanager": 2, "taskmanager.numberOfTaskSlots": 2,
        "execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": "64k",
        **DEFAULTS, **conf}))
    env.set_parallelism(4)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    facts = env.from_source(FileSource.parquet(tables["facts"]), "facts")
    dims = env.from_source(FileSource.parquet(tables["dims"]), "dims").filter(
        lambda row: row["d_key"] % 7 != 3)
    (facts.join(dims, left_on="f_key", right_on="d_key")
     .key_by("d_name").agg(F.sum("f_value").alias("total"), F.count("*").alias("n"))
     .sink_to(FileSink.parquet(str(out))))
    client = env.execute_async("adaptive join")
    client.get_job_execution_result(timeout_s=240)
    (node,) = [n for n in client.get_job_details().plan["nodes"] if "Join" in n["description"]]
    return node


def _check(tables: dict[str, str], out: Path) -> None:
    got = duckdb.sql(f"select d_name, total, n from read_parquet('{out}/**/*.parquet') "
                     "order by d_name").fetchall()
    want = duckdb.sql(
        f"select d_name, sum(f_value), count(*) from read_parquet('{tables['facts']}/*.parquet') "
        f"join read_parquet('{tables['dims']}/*.parquet') on f_key = d_key "
        "where d_key % 7 <> 3 group by d_name order by d_name").fetchall()
    assert len(want) == 18 and got == want


def test_a_small_side_is_broadcast_at_run_time_and_not_above_the_threshold(
        tables: dict[str, str], tmp_path: Path) -> None:
    small = _run(tables, tmp_path / "small", {
        **RUNTIME_ONLY, "table.optimizer.join.broadcast-threshold": "1m",
        "table.optimizer.skewed-join-optimization.strategy": "NONE"})
    assert small["operator_strategy"].startswith("BROADCAST_HASH_JOIN (adaptive, right side ")
    _check(tables, tmp_path / "small")

    tiny = _run(tables, tmp_path / "tiny", {
        **RUNTIME_ONLY, "table.optimizer.join.broadcast-threshold": "10",
        "table.optimizer.skewed-join-optimization.strategy": "NONE"})
    assert tiny["operator_strategy"] == ""
    _check(tables, tmp_path / "tiny")


def test_a_skewed_key_is_split_across_subtasks(tables: dict[str, str], tmp_path: Path) -> None:
    node = _run(tables, tmp_path / "skew", {
        "table.optimizer.join.broadcast-threshold": "-1",
        "table.optimizer.skewed-join-optimization.skewed-threshold": "1k",
        "table.optimizer.skewed-join-optimization.skewed-factor": "2"})
    assert node["operator_strategy"].startswith("HASH_JOIN (skewed subpartitions split: ")
    assert "(left, " in node["operator_strategy"]
    _check(tables, tmp_path / "skew")


def test_a_small_side_is_joined_where_the_large_side_is_produced(
        tables: dict[str, str], tmp_path: Path) -> None:
    """facts (estimated above the threshold at compile time; the Python filter's guessed
    selectivity would make dims a compile-time broadcast, hence RUNTIME_ONLY) wait for dims,
    and, dims being small, run the join themselves: the join vertex reads joined rows (FLIP-470 without the
    probe side's exchange)."""
    node = _run(tables, tmp_path / "pushed", {
        **RUNTIME_ONLY, "table.optimizer.join.broadcast-threshold": "10k",
        "table.optimizer.skewed-join-optimization.strategy": "NONE"})
    assert node["operator_strategy"].startswith("BROADCAST_HASH_JOIN (adaptive, right side ")
    assert node["operator_strategy"].endswith(" bytes, joined in Source: facts)")
    _check(tables, tmp_path / "pushed")


def test_a_large_side_is_cut_to_the_small_sides_keys_before_a_semi_join(
        tables: dict[str, str], tmp_path: Path) -> None:
    """dims semi-joined with facts, with the runtime filter on: a semi join cannot broadcast its
    left side, but its right side only tells whether a left key has a partner, so facts (held
    until dims finished) keep only rows with a dims key before their exchange, and the join
    vertex still runs the semi join."""
    out = tmp_path / "cut"
    env = StreamExecutionEnvironment.get_execution_environment(Configuration({
        "local.number-taskmanager": 2, "taskmanager.numberOfTaskSlots": 2,
        "execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": "64k",
        **DEFAULTS, **RUNTIME_ONLY, "table.optimizer.join.broadcast-threshold": "10k",
        "table.optimizer.skewed-join-optimization.strategy": "NONE",
        "table.optimizer.runtime-filter.enabled": "true"}))
    env.set_parallelism(4)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    dims = env.from_source(FileSource.parquet(tables["dims"]), "dims").filter(
        lambda row: row["d_key"] % 7 != 3)
    facts = env.from_source(FileSource.parquet(tables["facts"]), "facts")
    (dims.join(facts.select("f_key"), left_on="d_key", right_on="f_key", how="semi")
     .select("d_name").sink_to(FileSink.parquet(str(out))))
    client = env.execute_async("adaptive semi join")
    client.get_job_execution_result(timeout_s=240)
    (node,) = [n for n in client.get_job_details().plan["nodes"] if "Join" in n["description"]]
    assert node["operator_strategy"].startswith(
        "HASH_JOIN (right side cut to the keys of the left side, ")
    got = duckdb.sql(f"select d_name from read_parquet('{out}/**/*.parquet') order by d_name").fetchall()
    want = duckdb.sql(
        f"select d_name from read_parquet('{tables['dims']}/*.parquet') where d_key % 7 <> 3 "
        f"and d_key in (select f_key from read_parquet('{tables['facts']}/*.parquet')) "
        "order by d_name").fetchall()
    assert len(want) == 18 and got == want
