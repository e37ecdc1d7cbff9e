"""Runtime chaining end to end: on the local cluster with Spark, the AdaptiveBatchScheduler runs
a one-subtask aggregation and the one-subtask sort and FileSink after it as one task; and a job
whose every vertex runs one subtask (a join of two sources, an aggregation, a sort and a
FileSink) as one task altogether (whole-job chaining). The output is committed once and equals
DuckDB's answer, and the job's plan says what was chained (as REST and the web UI show it)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.connectors import FileSink, FileSource

pytestmark = [pytest.mark.spark]


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> str:
    """2 files, 6,000 rows over 30 keys."""
    root = tmp_path_factory.mktemp("runtime-chaining") / "facts"
    root.mkdir()
    n = 6_000
    table = pa.table({"k": pa.array([i % 30 for i in range(n)], pa.int64()),
                      "v": pa.array([(i * 37) % 101 for i in range(n)], pa.int64())})
    for p in range(2):
        pq.write_table(table.slice(p * n // 2, n // 2), root / f"part-{p}.parquet")
    return str(root)


@pytest.mark.parametrize("chaining", ["true", "false"])
def test_an_aggregation_sort_and_sink_run_as_one_task_and_commit_once(
        facts: str, tmp_path: Path, chaining: str) -> None:
    env = StreamExecutionEnvironment.get_execution_environment(Configuration({
        "execution.batch.adaptive.runtime-chaining.enabled": chaining,
        # on one Spark server the whole job would be one task (the next test)
        "execution.batch.adaptive.runtime-chaining.whole-job.enabled": "false",
        "jobmanager.scheduler": "AdaptiveBatch"}))
    env.set_parallelism(2)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    out = tmp_path / "top"
    (env.from_source(FileSource.parquet(facts), "facts")
     .key_by("k").agg(F.sum("v").alias("total"))
     .sort(F.col("total").desc(), F.col("k")).limit(5)
     .sink_to(FileSink.parquet(str(out))))
    client = env.execute_async("runtime chaining")
    client.get_job_execution_result(timeout_s=240)

    details = client.get_job_details()
    strategies = {n["id"]: n.get("operator_strategy", "") for n in details.plan["nodes"]}
    (aggregate,) = [v for v in details.vertices if v.name.startswith("GlobalKeyedAggregate")]
    (sort,) = [v for v in details.vertices if v.name.startswith("Sort")]
    ran = {v.id: [s.attempt_id for s in v.subtasks] for v in details.vertices}
    if chaining == "true":
        assert strategies[str(sort.id)] == f"chained into {aggregate.name} at run time"
        assert ran[sort.id] == ran[aggregate.id] and len(ran[sort.id]) == 1  # one task ran both
    else:
        assert strategies[str(sort.id)] == ""
        assert ran[sort.id] != ran[aggregate.id]
    got = duckdb.sql(f"select k, total from read_parquet('{out}/**/*.parquet') "
                     "order by total desc, k").fetchall()
    want = duckdb.sql(f"select k, sum(v) total from read_parquet('{facts}/*.parquet') group by k "
                      "order by total desc, k limit 5").fetchall()
    assert got == want and len(got) == 5


@pytest.mark.parametrize("whole_job", ["true", "false"])
def test_a_job_whose_vertices_all_run_one_subtask_runs_as_one_task(
        facts: str, tmp_path: Path, whole_job: str) -> None:
    names = tmp_path / "names"
    names.mkdir()
    pq.write_table(pa.table({"key": pa.array(range(0, 30, 2), pa.int64()),
                             "name": pa.array([f"key-{k}" for k in range(0, 30, 2)])}),
                   names / "names.parquet")
    env = StreamExecutionEnvironment.get_execution_environment(Configuration({
        "execution.batch.adaptive.runtime-chaining.whole-job.enabled": whole_job,
        "table.optimizer.join.broadcast-threshold": "-1",  # a hash join of two inputs
        "jobmanager.scheduler": "AdaptiveBatch"}))
    env.set_parallelism(1)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    out = tmp_path / "joined"
    facts_stream = env.from_source(FileSource.parquet(facts), "facts")
    names_stream = env.from_source(FileSource.parquet(str(names)), "names")
    (facts_stream.join(names_stream, left_on="k", right_on="key")
     .key_by("name").agg(F.sum("v").alias("total"), F.count("v").alias("n"))
     .sort(F.col("total").desc(), F.col("name"))
     .sink_to(FileSink.parquet(str(out))))
    client = env.execute_async("whole job")
    client.get_job_execution_result(timeout_s=240)

    details = client.get_job_details()
    strategies = {v.name: next(n.get("operator_strategy", "") for n in details.plan["nodes"]
                               if n["id"] == str(v.id)) for v in details.vertices}
    attempts = {s.attempt_id for v in details.vertices for s in v.subtasks}
    chained = {name for name, strategy in strategies.items() if strategy.endswith("(whole job)")}
    if whole_job == "true":
        (root,) = set(strategies) - chained
        assert len(attempts) == 1 and len(strategies) >= 4, strategies  # one task ran them all
        assert {strategies[name] for name in chained} == {
            f"chained into {root} at run time (whole job)"}
    else:
        assert len(attempts) >= 4 and not chained, strategies
    got = duckdb.sql(f"select name, total, n from read_parquet('{out}/**/*.parquet') "
                     "order by total desc, name").fetchall()
    want = duckdb.sql(
        f"select name, sum(v) total, count(v) n from read_parquet('{facts}/*.parquet') f "
        f"join read_parquet('{names}/*.parquet') m on f.k = m.key group by name "
        "order by total desc, name").fetchall()
    assert got == want and len(got) == 15
