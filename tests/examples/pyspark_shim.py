"""Run the example pipelines on plain PySpark DataFrames, without the flintlock runtime.

A development check of the examples' logic (and of the DuckDB references and ``compare.py``),
independent of the runtime: ``ShimEnvironment`` implements the slice of the DataStream API that the
examples use by mapping each call onto a DataFrame operation.

    .venv/bin/python -m tests.examples.pyspark_shim --data data/test

Not collected by pytest (the real tests run the examples on flintlock's MiniCluster).
"""

from __future__ import annotations

import argparse
import sys
import time
import types
from typing import Any


class _Source:
    def __init__(self, fmt: str, path: str) -> None:
        self.fmt, self.path = fmt, path


class _FileSource:
    @staticmethod
    def parquet(path: str) -> _Source:
        return _Source("parquet", path)

    @staticmethod
    def text(path: str) -> _Source:
        return _Source("text", path)


class _FileSink:
    @staticmethod
    def parquet(path: str) -> _Source:
        return _Source("parquet", path)


def install_fake_connectors() -> None:
    """Make ``from flintlock.connectors import FileSource, FileSink`` resolve to the shim's."""
    mod = types.ModuleType("flintlock.connectors")
    mod.FileSource = _FileSource  # type: ignore[attr-defined]
    mod.FileSink = _FileSink  # type: ignore[attr-defined]
    sys.modules["flintlock.connectors"] = mod


def _source_path(src: Any) -> tuple[str, str]:
    if isinstance(src, _Source):
        return src.fmt, src.path
    for attr in ("path", "_path", "paths"):
        if hasattr(src, attr):
            p = getattr(src, attr)
            p = p[0] if isinstance(p, (list, tuple)) else p
            fmt = getattr(src, "format", None) or getattr(src, "fmt", None) or "parquet"
            return str(fmt), str(p)
    raise TypeError(f"cannot read source {src!r}")


class ShimStream:
    def __init__(self, env: ShimEnvironment, df: Any) -> None:
        self.env, self.df = env, df

    def _wrap(self, df: Any) -> ShimStream:
        return ShimStream(self.env, df)

    def filter(self, cond: Any) -> ShimStream:
        return self._wrap(self.df.filter(cond))

    def select(self, *cols: Any) -> ShimStream:
        return self._wrap(self.df.select(*cols))

    def with_column(self, name: str, col: Any) -> ShimStream:
        return self._wrap(self.df.withColumn(name, col))

    def drop(self, *cols: str) -> ShimStream:
        return self._wrap(self.df.drop(*cols))

    def flat_map(self, fn: Any, schema: str) -> ShimStream:
        return self._wrap(self.df.rdd.flatMap(lambda r: list(fn(r))).toDF(schema))

    def map(self, fn: Any, schema: str) -> ShimStream:
        return self._wrap(self.df.rdd.map(fn).toDF(schema))

    def key_by(self, *keys: str) -> ShimKeyed:
        return ShimKeyed(self, list(keys))

    def agg(self, *aggs: Any) -> ShimStream:
        return self._wrap(self.df.agg(*aggs))

    def join(
        self,
        other: ShimStream,
        on: Any = None,
        left_on: list[str] | None = None,
        right_on: list[str] | None = None,
        how: str = "inner",
    ) -> ShimStream:
        if on is not None:
            return self._wrap(self.df.join(other.df, on=on, how=how))
        assert left_on and right_on
        cond = None
        for lk, rk in zip(left_on, right_on, strict=True):
            c = self.df[lk] == other.df[rk]
            cond = c if cond is None else cond & c
        return self._wrap(self.df.join(other.df, on=cond, how=how))

    def union(self, other: ShimStream) -> ShimStream:
        return self._wrap(self.df.unionByName(other.df))

    def distinct(self) -> ShimStream:
        return self._wrap(self.df.distinct())

    def sort(self, *cols: Any) -> ShimStream:
        return self._wrap(self.df.orderBy(*cols))

    def limit(self, n: int) -> ShimStream:
        return self._wrap(self.df.limit(n))

    def sink_to(self, sink: Any) -> None:
        fmt, path = _source_path(sink)
        self.env.sinks.append((self.df, path))

    def execute_and_collect(self) -> list[Any]:
        for df, path in self.env.sinks:
            df.write.mode("overwrite").parquet(path)
        self.env.sinks.clear()
        return self.df.collect()


class ShimKeyed:
    def __init__(self, stream: ShimStream, keys: list[str]) -> None:
        self.stream, self.keys = stream, keys

    def agg(self, *aggs: Any) -> ShimStream:
        return self.stream._wrap(self.stream.df.groupBy(*self.keys).agg(*aggs))

    def count(self) -> ShimStream:
        return self.stream._wrap(self.stream.df.groupBy(*self.keys).count())

    def sum(self, col: str) -> ShimStream:
        return self.stream._wrap(self.stream.df.groupBy(*self.keys).sum(col))


class ShimEnvironment:
    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.sinks: list[tuple[Any, str]] = []

    def set_parallelism(self, n: int) -> None:
        pass

    def set_runtime_mode(self, mode: Any) -> None:
        pass

    def from_source(self, src: Any, name: str) -> ShimStream:
        fmt, path = _source_path(src)
        reader = self.spark.read
        df = reader.text(path) if fmt == "text" else reader.parquet(path)
        return ShimStream(self, df)


def main(argv: list[str] | None = None) -> int:
    import duckdb
    from pyspark.sql import SparkSession

    from examples import flights, word_count
    from examples.tpch import QUERY_NAMES, builder, reference
    from examples.tpch._common import tpch_path
    from tests.examples.compare import assert_same_result

    p = argparse.ArgumentParser()
    p.add_argument("--data", default="data/test")
    args = p.parse_args(argv)
    install_fake_connectors()
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    env = ShimEnvironment(spark)
    con = reference.connect(tpch_path(args.data))
    failures = 0

    def check(name: str, stream: Any, cols: list[str], rows: list[tuple], keys: Any) -> None:
        nonlocal failures
        t0 = time.perf_counter()
        actual = stream.execute_and_collect()
        try:
            assert_same_result(actual, cols, rows, keys, what=name)
            print(f"ok   {name}: {len(actual)} rows ({time.perf_counter() - t0:.2f}s)")
        except AssertionError as e:
            failures += 1
            print(f"FAIL {name}: {e}")

    for q in QUERY_NAMES:
        cols, rows = reference.run(con, q)
        check(q, builder(q)(env, args.data), cols, rows, reference.SORT_KEYS[q])
    cur = duckdb.execute(flights.reference_sql(args.data))
    out = "/tmp/flintlock-shim-flights"
    check(
        "flights",
        flights.build(env, args.data, out),
        [d[0] for d in cur.description],
        cur.fetchall(),
        flights.SORT_KEYS,
    )
    print("     flights sink:", duckdb.execute(f"select count(*) from '{out}/*.parquet'").fetchone())
    for python in (False, True):
        cur = duckdb.execute(word_count.reference_sql(args.data))
        check(
            f"word_count(python={python})",
            word_count.build(env, args.data, python=python),
            [d[0] for d in cur.description],
            cur.fetchall(),
            word_count.SORT_KEYS,
        )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
