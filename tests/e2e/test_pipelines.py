"""User-level pipelines, not from examples/, run on the local cluster and checked against DuckDB.

Each test writes its own input with pyarrow (several Parquet files), builds a pipeline with the
public API, runs it through ``env.execute`` on the MiniCluster (real Dispatcher, ResourceManager,
JobMaster, two TaskExecutors, Spark), and compares with DuckDB's answer on the same files.
"""

from __future__ import annotations

import decimal
import math
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


def _env(parallelism: int = 2, spark_remote: str | None = None) -> StreamExecutionEnvironment:
    """Local cluster of 2 TaskManagers x 2 slots; on a remote Spark when ``spark_remote`` is set."""
    conf = Configuration({"local.number-taskmanager": 2, "taskmanager.numberOfTaskSlots": 2})
    if spark_remote:
        conf.set_string("spark.remote", spark_remote)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    return env


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """orders (3 files, 3000 rows) and customers (2 files, 120 rows, some without orders)."""
    root = tmp_path_factory.mktemp("e2e")
    paths = {}
    n_orders, n_customers = 3000, 120
    orders = pa.table({
        "o_id": pa.array(range(n_orders), pa.int64()),
        "o_cust": pa.array([(i * 7) % 100 for i in range(n_orders)], pa.int64()),
        "o_amount": pa.array([round((i % 97) * 1.25 + 0.5, 2) for i in range(n_orders)], pa.float64()),
        "o_status": pa.array(["FOP"[i % 3] for i in range(n_orders)], pa.string()),
        "o_note": pa.array([None if i % 11 == 0 else f"note {i % 5} x" for i in range(n_orders)],
                           pa.string()),
    })
    customers = pa.table({
        "c_id": pa.array(range(n_customers), pa.int64()),
        "c_name": pa.array([f"customer#{i:03d}" for i in range(n_customers)], pa.string()),
        "c_region": pa.array(["EU", "US", "ASIA", "EU"][i % 4] for i in range(n_customers)),
    })
    for name, table, parts in (("orders", orders, 3), ("customers", customers, 2)):
        d = root / name
        d.mkdir()
        step = math.ceil(table.num_rows / parts)
        for p in range(parts):
            pq.write_table(table.slice(p * step, step), d / f"part-{p}.parquet")
        paths[name] = str(d)
    paths["root"] = str(root)
    return paths


def _duck(sql: str, **paths: str) -> list[tuple[Any, ...]]:
    for name, path in paths.items():
        sql = sql.replace("{" + name + "}", f"read_parquet('{path}/*.parquet')")
    return [tuple(r) for r in duckdb.sql(sql).fetchall()]


def _rows(rows: list[Any]) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in rows]


def _close(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> None:
    assert len(a) == len(b), f"{len(a)} rows vs {len(b)} rows"
    for ra, rb in zip(a, b, strict=True):
        assert len(ra) == len(rb)
        for x, y in zip(ra, rb, strict=True):
            if isinstance(x, float) or isinstance(y, float):
                assert x == pytest.approx(y, rel=1e-9), (ra, rb)
            else:
                assert x == y, (ra, rb)


def test_filter_key_by_aggregate_sort(tables: dict[str, str]) -> None:
    env = _env()
    orders = env.from_source(FileSource.parquet(tables["orders"]), "orders")
    out = (
        orders.filter("o_status <> 'P'")
        .with_column("big", F.col("o_amount") > 60)
        .key_by("o_cust", "big")
        .agg(F.sum("o_amount").alias("total"), F.count("*").alias("n"), F.max("o_id").alias("last"))
        .sort("o_cust", F.col("big").desc())
    )
    got = _rows(out.execute_and_collect())
    want = _duck(
        "select o_cust, o_amount > 60 as big, sum(o_amount), count(*), max(o_id) from {orders} "
        "where o_status <> 'P' group by all order by o_cust, big desc", orders=tables["orders"])
    _close(got, want)


@pytest.mark.parametrize("how", ["inner", "left", "semi", "anti", "full"])
def test_joins(tables: dict[str, str], how: str) -> None:
    env = _env()
    orders = env.from_source(FileSource.parquet(tables["orders"]), "orders")
    customers = env.from_source(FileSource.parquet(tables["customers"]), "customers")
    per_customer = orders.key_by("o_cust").agg(F.count("*").alias("n"))
    joined = customers.join(per_customer, left_on="c_id", right_on="o_cust", how=how)
    if how in ("semi", "anti"):
        got = _rows(joined.select("c_id", "c_name").sort("c_id").execute_and_collect())
        op = "" if how == "semi" else "not"
        want = _duck(f"select c_id, c_name from {{customers}} where {op} exists "
                     "(select 1 from {orders} where o_cust = c_id) order by c_id",
                     customers=tables["customers"], orders=tables["orders"])
    else:
        got = _rows(joined.select("c_id", "o_cust", "n").sort("c_id", "o_cust").execute_and_collect())
        duck_how = {"inner": "inner", "left": "left", "full": "full outer"}[how]
        want = _duck(
            "select c_id, o_cust, n from {customers} " + duck_how + " join "
            "(select o_cust, count(*) n from {orders} group by o_cust) on c_id = o_cust "
            "order by c_id nulls last, o_cust nulls last",
            customers=tables["customers"], orders=tables["orders"])
    _close(got, want)


def test_python_functions_map_flat_map_filter_and_keyed_reduce(tables: dict[str, str],
                                                               spark_target: str | None) -> None:
    env = _env(spark_remote=spark_target)
    orders = env.from_source(FileSource.parquet(tables["orders"]), "orders")
    words = (
        orders.filter(lambda r: r.o_note is not None)
        .flat_map(lambda r: [(w, r["o_amount"]) for w in r.o_note.split(" ")], "word string, amount double")
        .map(lambda r: {"word": r.word.upper(), "amount": r.amount * 2}, "word string, amount double")
        .key_by("word")
        .reduce(lambda a, b: (a.word, a.amount + b.amount))
        .sort("word")
    )
    got = _rows(words.execute_and_collect())
    want = _duck(
        "select upper(w), sum(o_amount * 2) from (select unnest(string_split(o_note, ' ')) w, o_amount "
        "from {orders} where o_note is not null) group by 1 order by 1", orders=tables["orders"])
    _close(got, want)


def test_map_batches_union_distinct_limit_and_keyed_process(tables: dict[str, str],
                                                             spark_target: str | None) -> None:
    import pandas as pd

    env = _env(spark_remote=spark_target)
    orders = env.from_source(FileSource.parquet(tables["orders"]), "orders")

    def double(batch: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({"o_cust": batch["o_cust"] * 2})

    evens = orders.select("o_cust").map_batches(double, "o_cust long", batch_format="pandas")
    odds = orders.select((F.col("o_cust") * 2 + 1).alias("o_cust"))
    got = _rows(evens.union(odds).distinct().sort(F.col("o_cust").desc()).limit(7).execute_and_collect())
    want = _duck("select distinct * from (select o_cust * 2 c from {orders} union all "
                 "select o_cust * 2 + 1 from {orders}) order by c desc limit 7", orders=tables["orders"])
    assert got == want

    def top_two(key: Any, rows: Any) -> Any:
        ordered = sorted(rows, key=lambda r: (-r.o_amount, r.o_id))[:2]
        return [(r.o_cust, r.o_id, r.o_amount) for r in ordered]

    top = (orders.key_by("o_cust").process(top_two, "o_cust long, o_id long, o_amount double")
           .sort("o_cust", F.col("o_amount").desc(), "o_id"))
    got = _rows(top.execute_and_collect())
    want = _duck("select o_cust, o_id, o_amount from (select *, row_number() over (partition by o_cust "
                 "order by o_amount desc, o_id) rn from {orders}) where rn <= 2 "
                 "order by o_cust, o_amount desc, o_id", orders=tables["orders"])
    _close(got, want)


def test_file_sink_output_is_complete_and_readable(tables: dict[str, str], tmp_path: Path) -> None:
    env = _env()
    out = tmp_path / "by_region"
    orders = env.from_source(FileSource.parquet(tables["orders"]), "orders")
    customers = env.from_source(FileSource.parquet(tables["customers"]), "customers")
    (orders.join(customers, left_on="o_cust", right_on="c_id")
     .key_by("c_region").agg(F.sum("o_amount").alias("amount"), F.count("*").alias("n"))
     .sink_to(FileSink.parquet(str(out))))
    result = env.execute("regions")
    assert result.net_runtime_ms > 0
    assert not any(p.name.startswith("_temporary") for p in out.iterdir())
    got = _duck("select c_region, amount, n from {out} order by c_region", out=str(out))
    want = _duck("select c_region, sum(o_amount), count(*) from {orders} join {customers} "
                 "on o_cust = c_id group by c_region order by c_region",
                 orders=tables["orders"], customers=tables["customers"])
    _close(got, want)


def test_collection_and_sequence_sources() -> None:
    env = _env()
    rows = env.from_collection([(1, "a"), (2, "b"), (3, "a")], "k int, v string")
    got = _rows(rows.key_by("v").sum("k").sort("v").execute_and_collect())
    assert got == [("a", 4), ("b", 2)]
    total = env.from_sequence(1, 1000).agg(F.sum("id").alias("s"), F.count("*").alias("n"))
    assert _rows(total.execute_and_collect()) == [(500500, 1000)]


@pytest.mark.parametrize("how", ["inner", "left", "anti"])
def test_broadcast_join_hint_chains_the_join_to_the_probe_side(tables: dict[str, str], how: str) -> None:
    cols = ["o_id", "c_name"] if how != "anti" else ["o_id", "o_cust"]

    def build(env: StreamExecutionEnvironment) -> Any:
        orders = env.from_source(FileSource.parquet(tables["orders"]), "orders")
        customers = env.from_source(FileSource.parquet(tables["customers"]), "customers")
        return (orders.filter("o_status <> 'P'")
                .join(customers.filter("c_region <> 'US'").broadcast(), left_on="o_cust",
                      right_on="c_id", how=how)
                .select(*cols).sort("o_id"))

    plan_env = _env()
    build(plan_env).print()
    names = [v.name for v in plan_env.get_job_graph().vertices]
    assert "Source: orders -> Filter -> Join -> Select" in names  # orders cross no exchange
    got = _rows(build(_env()).execute_and_collect())
    duck_join = {"inner": "join", "left": "left join", "anti": "anti join"}[how]
    want = _duck(f"select {', '.join(cols)} from (select * from {{orders}} where o_status <> 'P') "
                 f"{duck_join} (select * from {{customers}} where c_region <> 'US') on o_cust = c_id "
                 "order by o_id", orders=tables["orders"], customers=tables["customers"])
    _close(got, want)


@pytest.fixture(scope="module")
def amounts(tmp_path_factory: pytest.TempPathFactory) -> str:
    """1500 rows in 3 files: a DECIMAL(15,2) with nulls, an int with nulls, a string key."""
    d = tmp_path_factory.mktemp("amounts")
    n = 1500
    table = pa.table({
        "k": pa.array([f"g{i % 7}" for i in range(n)], pa.string()),
        "amount": pa.array([None if i % 13 == 0 else decimal.Decimal(f"{(i * 37) % 1000}.{i % 100:02d}")
                            for i in range(n)], pa.decimal128(15, 2)),
        "qty": pa.array([None if i % 5 == 0 else i % 50 for i in range(n)], pa.int32()),
    })
    for p in range(3):
        pq.write_table(table.slice(p * 500, 500), d / f"part-{p}.parquet")
    return str(d)


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "global"])
def test_two_phase_aggregation_equals_one_phase_and_duckdb(amounts: str, keyed: bool) -> None:
    def build(env: StreamExecutionEnvironment) -> Any:
        src = env.from_source(FileSource.parquet(amounts), "amounts").filter("qty IS NULL OR qty < 45")
        aggs = (F.sum("amount").alias("total"), F.avg("amount").alias("mean"),
                F.avg("qty").alias("mean_qty"), F.count("qty").alias("n_qty"),
                F.count(F.lit(1)).alias("n"), F.min("amount").alias("low"),
                F.max("k").alias("top"))
        return src.key_by("k").agg(*aggs).sort("k") if keyed else src.agg(*aggs)

    def run(strategy: str) -> tuple[list[tuple[Any, ...]], list[str]]:
        plan_env = _env().configure({"table.optimizer.agg-phase-strategy": strategy})
        build(plan_env).print()
        names = [v.name for v in plan_env.get_job_graph().vertices]
        env = _env().configure({"table.optimizer.agg-phase-strategy": strategy})
        return _rows(build(env).execute_and_collect()), names

    two, two_names = run("AUTO")
    one, one_names = run("ONE_PHASE")
    local = "LocalKeyedAggregate" if keyed else "LocalAggregate"
    assert any(local in n for n in two_names) and not any(local in n for n in one_names)
    assert two == one  # same values, same decimal scales
    group = "group by k order by k" if keyed else ""
    keys = "k, " if keyed else ""
    want = _duck(f"select {keys}sum(amount), avg(amount), avg(qty), count(qty), count(*), min(amount), "
                 f"max(k) from {{amounts}} where qty is null or qty < 45 {group}", amounts=amounts)
    got = [tuple(float(x) if isinstance(x, decimal.Decimal) else x for x in r) for r in two]
    want = [tuple(float(x) if isinstance(x, decimal.Decimal) else x for x in r) for r in want]
    _close(got, want)
