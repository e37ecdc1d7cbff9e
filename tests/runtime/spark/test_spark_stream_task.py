"""SparkStreamTask on the shared Spark session: shuffles, joins, Python operators, errors, cancel."""

from __future__ import annotations

import collections
import shutil
import threading
import time

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from spark_task_helpers import Job, fn, gate, ipc, nodes, output, read_ipc

from flintlock.connectors import CollectionSource, CollectSink, PrintSink, SequenceSource
from flintlock.runtime.ids import JobVertexID
from flintlock.runtime.jobgraph.types import ShipStrategy
from flintlock.runtime.operators import specs as S
from flintlock.runtime.shuffle import PartitionNotFoundException
from flintlock.runtime.spark.errors import OperatorException
from flintlock.runtime.spark.stream_task import SparkStreamTask
from flintlock.runtime.taskmanager.invokable import TaskCancelledError
from flintlock.runtime.taskmanager.task_execution_state import SerializedError
from flintlock.testing.waiting import wait_until_sync

pytestmark = [pytest.mark.spark]


@pytest.fixture
def job(tmp_path, spark_provider):
    return Job(str(tmp_path / "shuffle"), spark_provider)


def collected(results, uid="c"):
    tables = []
    for r in results:
        for name, data in r.accumulators.items():
            if name.startswith(f"collect-{uid}/"):
                tables.append(read_ipc(data))
    return pa.concat_tables(tables).to_pylist() if tables else []


def collect_chain(*specs, gates=(), uid="c"):
    return S.OperatorChain(nodes(*specs, S.SinkSpec(CollectSink(uid)), gates=gates, outputs=()))


def test_hash_exchange_routes_each_key_to_exactly_one_consumer(job):
    # Producer: sequence 0..9999 on 2 subtasks -> filter -> HASH(k) into 4 subpartitions.
    out = output(ShipStrategy.HASH, ("k",))
    producer = S.OperatorChain(
        nodes(S.SourceSpec(SequenceSource(0, 9999)),
              S.FilterSpec(F.col("id") % 3 != 0),
              S.WithColumnSpec("k", F.col("id") % 50)),
        outputs=(out,),
    )
    splits = SequenceSource(0, 9999).enumerate_splits(2)
    results = job.run_vertex(producer, 2, splits=splits, subpartitions=(4,))
    expected = sorted(i for i in range(10000) if i % 3 != 0)
    assert sum(sum(r.partitions[0].rows_per_subpartition) for r in results) == len(expected)
    assert [r.metrics.records_in for r in results] == [5000, 5000]
    assert sum(r.metrics.records_out for r in results) == len(expected)
    assert all(r.metrics.bytes_out > 0 for r in results)
    assert results[0].partitions[0].schema == "`id` bigint NOT NULL, `k` bigint"
    # Consumers: subtask 0 reads subpartitions [0, 1], subtask 1 reads [2, 3].
    gates = [(gate(results, 0, 0, 1),), (gate(results, 0, 2, 3),)]
    consumers = job.run_vertex(collect_chain(S.SelectSpec(("id", "k")), gates=(0,)), 2, gates=gates)
    per_consumer = [collected([c]) for c in consumers]
    ids = [row["id"] for rows in per_consumer for row in rows]
    assert sorted(ids) == expected  # union == input, no duplicates
    keys = [{row["k"] for row in rows} for rows in per_consumer]
    assert keys[0].isdisjoint(keys[1]) and keys[0] | keys[1] == set(range(50))
    assert sum(c.metrics.records_in for c in consumers) == len(expected)


def test_rebalance_balances_and_broadcast_reaches_everyone(job):
    out_rr = output(ShipStrategy.REBALANCE)
    producer = S.OperatorChain(nodes(S.SourceSpec(SequenceSource(1, 1000))), outputs=(out_rr,))
    res = job.run_vertex(producer, 1, splits=SequenceSource(1, 1000).enumerate_splits(1),
                         subpartitions=(4,))
    rows = res[0].partitions[0].rows_per_subpartition
    assert sum(rows) == 1000 and max(rows) - min(rows) <= 8
    out_b = output(ShipStrategy.BROADCAST)
    producer_b = S.OperatorChain(nodes(S.SourceSpec(SequenceSource(1, 10))), outputs=(out_b,))
    res_b = job.run_vertex(producer_b, 1, splits=SequenceSource(1, 10).enumerate_splits(1),
                           subpartitions=(1,))
    gates = [(gate(res_b, 0, 0, 0, ShipStrategy.BROADCAST),)] * 2
    consumers = job.run_vertex(collect_chain(S.UnionSpec(), gates=(0,)), 2, gates=gates)
    for c in consumers:
        rows = collected([c])
        assert sorted(r["id"] for r in rows) == list(range(1, 11))
        assert set(rows[0]) == {"id"}  # no partition column leaks into the consumer


def _collection(rows, ddl):
    table = pa.Table.from_pylist(rows)
    return CollectionSource(ipc(table), ddl)


def _produce(job, source, keys, n_sub=2, parallelism=1):
    out = output(ShipStrategy.HASH, keys)
    chain = S.OperatorChain(nodes(S.SourceSpec(source)), outputs=(out,))
    return job.run_vertex(chain, parallelism, splits=source.enumerate_splits(parallelism),
                          subpartitions=(n_sub,))


def test_join_inner_and_anti(job):
    left_rows = [{"id": i, "name": f"n{i}"} for i in range(20)]
    right_rows = [{"id": i, "score": i * 10} for i in range(10, 30, 2)]
    left = _produce(job, _collection(left_rows, "id bigint, name string"), ("id",))
    right = _produce(job, _collection(right_rows, "id bigint, score bigint"), ("id",))
    expected = sorted((r["id"], lr["name"], r["score"]) for lr in left_rows for r in right_rows
                      if lr["id"] == r["id"])
    for how, exp in [("inner", expected),
                     ("anti", sorted((lr["id"], lr["name"]) for lr in left_rows
                                     if lr["id"] not in {r["id"] for r in right_rows}))]:
        chain = collect_chain(S.JoinSpec(how, ("id",), ("id",)), gates=(0, 1))
        gates = [(gate(left, 0, s, s), gate(right, 0, s, s)) for s in range(2)]
        got = collected(job.run_vertex(chain, 2, gates=gates))
        assert sorted(tuple(r.values()) for r in got) == exp, how
    # Different key names keep both key columns.
    renamed = _produce(job, _collection([{"rid": i, "score": i} for i in range(5)],
                                        "rid bigint, score bigint"), ("rid",))
    chain = collect_chain(S.JoinSpec("inner", ("id",), ("rid",)), gates=(0, 1))
    gates = [(gate(left, 0, s, s), gate(renamed, 0, s, s)) for s in range(2)]
    got = collected(job.run_vertex(chain, 2, gates=gates))
    assert sorted((r["id"], r["rid"]) for r in got) == [(i, i) for i in range(5)]


def test_python_operators(job):
    rows = [{"word": w, "n": i} for i, w in enumerate("a b c a b a d".split())]
    src = _collection(rows, "word string, n bigint")
    splits = src.enumerate_splits(1)

    def run(*specs):
        return collected(job.run_vertex(collect_chain(S.SourceSpec(src), *specs), 1, splits=splits))

    got = run(S.MapSpec(fn(lambda r: (r.word.upper(), r["n"] * 2)), "w string, m bigint"))
    assert sorted((r["w"], r["m"]) for r in got) == sorted((x["word"].upper(), x["n"] * 2) for x in rows)
    got = run(S.FlatMapSpec(fn(lambda r: [{"c": ch} for ch in r.word * r.n]), "c string"))
    assert len(got) == sum(x["n"] for x in rows)
    got = run(S.FilterFunctionSpec(fn(lambda r: r.n % 2 == 0)))
    assert sorted(r["n"] for r in got) == [0, 2, 4, 6]

    def add_col(batch):
        return batch.append_column("n2", pa.compute.multiply(batch.column("n"), 2))
    got = run(S.MapBatchesSpec(fn(add_col), "word string, n bigint, n2 bigint", "arrow"))
    assert sorted(r["n2"] for r in got) == [2 * x["n"] for x in rows]
    got = run(S.MapBatchesSpec(fn(lambda pdf: pdf.assign(n=pdf.n + 1)), "word string, n bigint",
                               "pandas"))
    assert sorted(r["n"] for r in got) == [x["n"] + 1 for x in rows]

    def summarize(key, group):
        yield (key, len(group), sum(r.n for r in group))
    got = run(S.KeyedProcessSpec(("word",), fn(summarize), "word string, cnt bigint, total bigint"))
    exp = collections.defaultdict(lambda: [0, 0])
    for x in rows:
        exp[x["word"]][0] += 1
        exp[x["word"]][1] += x["n"]
    assert sorted((r["word"], r["cnt"], r["total"]) for r in got) == sorted(
        (k, v[0], v[1]) for k, v in exp.items())
    got = run(S.KeyedReduceSpec(("word",), fn(lambda acc, r: (acc.word, acc.n + r.n))))
    assert sorted((r["word"], r["n"]) for r in got) == sorted((k, v[1]) for k, v in exp.items())


def test_union_sort_limit_and_aggregate(job):
    a = _produce(job, SequenceSource(0, 49), ("id",), n_sub=1)
    b = _produce(job, SequenceSource(100, 149), ("id",), n_sub=1)
    chain = collect_chain(S.UnionSpec(), S.SortSpec((F.col("id").desc(),)), S.LimitSpec(5),
                          gates=(0, 1))
    got = collected(job.run_vertex(chain, 1, gates=[(gate(a, 0, 0, 0), gate(b, 0, 0, 0))]))
    assert [r["id"] for r in got] == [149, 148, 147, 146, 145]
    chain = collect_chain(S.WithColumnSpec("g", F.col("id") % 2),
                          S.KeyedAggregateSpec(("g",), (F.count("*").alias("c"),)),
                          S.GlobalAggregateSpec((F.sum("c").alias("total"),)), gates=(0, 1))
    got = collected(job.run_vertex(chain, 1, gates=[(gate(a, 0, 0, 0), gate(b, 0, 0, 0))]))
    assert got == [{"total": 100}]


def test_empty_gate_yields_empty_frame_with_schema(job):
    res = _produce(job, SequenceSource(0, 3), ("id",), n_sub=64)
    empty = [k for k, n in enumerate(res[0].partitions[0].rows_per_subpartition) if n == 0][:1]
    chain = collect_chain(S.DistinctSpec(), gates=(0,))
    got = job.run_vertex(chain, 1, gates=[(gate(res, 0, empty[0], empty[0]),)])
    assert collected(got) == [] and got[0].metrics.records_in == 0
    assert read_ipc(got[0].accumulators["collect-c/0"]).schema.names == ["id"]


def test_user_column_named_sp_survives_exchange(job):
    src = _collection([{"sp": i, "v": str(i)} for i in range(10)], "sp bigint, v string")
    res = _produce(job, src, ("sp",), n_sub=2)
    assert res[0].partitions[0].schema.startswith("`sp` bigint")
    got = collected(job.run_vertex(collect_chain(S.SelectSpec(("sp", "v")), gates=(0,)), 1,
                                   gates=[(gate(res, 0, 0, 1),)]))
    assert sorted((r["sp"], r["v"]) for r in got) == [(i, str(i)) for i in range(10)]


def test_print_sink_uses_flinks_format(job):
    chain = S.OperatorChain(nodes(S.SourceSpec(SequenceSource(1, 4)), S.SinkSpec(PrintSink("out")),
                                  outputs=()))
    res = job.run_vertex(chain, 2, splits=SequenceSource(1, 4).enumerate_splits(2))
    assert sorted(job.printed) == ["out:1> Row(id=1)", "out:1> Row(id=2)", "out:2> Row(id=3)",
                                   "out:2> Row(id=4)"]
    assert [r.metrics.records_out for r in res] == [2, 2]


def test_missing_column_names_column_and_operator(job):
    chain = collect_chain(S.SourceSpec(SequenceSource(1, 3)), S.FilterSpec(F.col("foo") > 1))
    with pytest.raises(OperatorException) as info:
        job.run_vertex(chain, 1, name="Source -> Filter",
                       splits=SequenceSource(1, 3).enumerate_splits(1))
    msg = str(info.value)
    assert "Operator 'Filter' of vertex 'Source -> Filter'" in msg
    assert "column 'foo' does not exist" in msg and "UNRESOLVED_COLUMN" in msg
    err = SerializedError.from_exception(info.value)
    assert err.non_recoverable


def test_unpicklable_function_is_non_recoverable(job):
    bad = S.SerializedFunction("my_module.broken_fn", b"not a pickle")
    chain = collect_chain(S.SourceSpec(SequenceSource(1, 3)), S.MapSpec(bad, "x bigint"))
    with pytest.raises(OperatorException, match="my_module.broken_fn") as info:
        job.run_vertex(chain, 1, splits=SequenceSource(1, 3).enumerate_splits(1))
    assert info.value.non_recoverable


def test_user_function_error_is_recoverable_and_named(job):
    def boom(row):
        raise ValueError("bad row")
    chain = collect_chain(S.SourceSpec(SequenceSource(1, 3)), S.MapSpec(fn(boom), "x bigint"))
    with pytest.raises(OperatorException, match="ValueError: bad row") as info:
        job.run_vertex(chain, 1, splits=SequenceSource(1, 3).enumerate_splits(1))
    assert not info.value.non_recoverable
    assert "boom" in str(info.value)


def test_deleted_partition_raises_partition_not_found(job):
    res = _produce(job, SequenceSource(0, 99), ("id",), n_sub=2)
    shutil.rmtree(res[0].partitions[0].uri)
    with pytest.raises(PartitionNotFoundException) as info:
        job.run_vertex(collect_chain(S.UnionSpec(), gates=(0,)), 1, gates=[(gate(res, 0, 0, 1),)])
    err = SerializedError.from_exception(info.value)
    assert err.partition_not_found == str(res[0].partitions[0].partition_id)


def test_cancel_interrupts_running_spark_job(job, tmp_path):
    started = tmp_path / "udf-started"

    def slow(batch):
        started.touch()  # the Python worker is a separate process: signal through a file
        time.sleep(0.5)
        return batch
    chain = collect_chain(S.SourceSpec(SequenceSource(0, 199)),
                          S.MapBatchesSpec(fn(slow), "id bigint", "arrow"))
    # 200 rows in batches of 1 row -> ~100 s of sleeping if not cancelled.
    job.provider.get().conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1")
    try:
        tdd = job.tdd(chain, vertex=JobVertexID.generate(),
                      subtask=0, parallelism=1, splits=tuple(SequenceSource(0, 199).enumerate_splits(1)[0]))
        task = SparkStreamTask(job.env(tdd))
        outcome = {}

        def run():
            try:
                task.invoke()
                outcome["result"] = "finished"
            except BaseException as exc:
                outcome["result"] = exc

        th = threading.Thread(target=run)
        th.start()
        wait_until_sync(started.exists, timeout_s=60, describe=lambda: outcome)
        assert th.is_alive()
        t0 = time.monotonic()
        task.cancel()
        th.join(20)
        assert not th.is_alive()
        assert time.monotonic() - t0 < 10
        assert isinstance(outcome["result"], TaskCancelledError)
    finally:
        job.provider.get().conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
