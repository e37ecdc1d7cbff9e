"""Reading sources and writing sinks with Spark (the Task side of ``flintlock.connectors``).

Dispatches on the connector object's type. Sources yield a DataFrame over this subtask's splits
plus the records/bytes they hold when that is cheap to know (ranges, Parquet footers, file sizes).
Sinks return ``(committable, accumulators, records_out)``.
"""

from __future__ import annotations

import io
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from flintlock.connectors.collection import CollectionSource, RowRangeSplit, SequenceSource
from flintlock.connectors.datagen import DataGeneratorSource, GeneratorSplit
from flintlock.connectors.exceptions import SinkException, SourceException
from flintlock.connectors.file import FileSink, FileSource, FileSplit
from flintlock.connectors.sinks import CollectSink, PrintSink
from flintlock.connectors.socket import SocketLines, SocketTextSource
from flintlock.runtime.spark.connect_plans import observe
from flintlock.runtime.spark.epoch_sources import GeneratorRange
from flintlock.runtime.spark.parquet_schema import spark_schema
from flintlock.runtime.spark.schema import to_arrow

__all__ = ["SourceRead", "read_source", "write_sink"]


class SourceRead:
    """A source DataFrame with its input records and bytes (0 when unknown)."""

    def __init__(self, df: Any, records: int = 0, size: int = 0) -> None:
        self.df = df
        self.records = records
        self.bytes = size


def _empty(spark: Any, schema: str) -> Any:
    return spark.createDataFrame([], schema=schema)


def read_source(spark: Any, source: Any, splits: Sequence[Any]) -> SourceRead:
    """The DataFrame of ``splits`` of ``source``.

    Raises:
        SourceException: unknown source type, or a file source without a known schema and no
            split to infer it from (the message names the path).
    """
    if isinstance(source, SequenceSource):
        ranges = [s for s in splits if isinstance(s, RowRangeSplit)]
        if not ranges:
            return SourceRead(spark.range(0, 0))
        df = None
        for r in ranges:
            part = spark.range(r.start, r.end)
            df = part if df is None else df.union(part)
        return SourceRead(df, sum(r.end - r.start for r in ranges))
    if isinstance(source, CollectionSource):
        ranges = [s for s in splits if isinstance(s, RowRangeSplit)]
        if not ranges:
            return SourceRead(_empty(spark, source.schema_ddl))
        table = source.table()
        parts = [table.slice(r.start, r.end - r.start) for r in ranges]
        data = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        return SourceRead(spark.createDataFrame(data, schema=source.schema_ddl), data.num_rows)
    if isinstance(source, FileSource):
        return _read_files(spark, source, [s for s in splits if isinstance(s, FileSplit)])
    if isinstance(source, DataGeneratorSource):
        generated = [s if isinstance(s, GeneratorRange) else GeneratorRange(s, 0, s.size() or 0)
                     for s in splits if isinstance(s, (GeneratorRange, GeneratorSplit))]
        return _generate(spark, source, generated)
    if isinstance(source, SocketTextSource):
        lines = [line for s in splits if isinstance(s, SocketLines) for line in s.lines]
        table = pa.table({"value": pa.array(lines, pa.string())})
        return SourceRead(spark.createDataFrame(table, schema="value string"), len(lines))
    raise SourceException(f"unsupported source {type(source).__qualname__}: {source!r}")


#: positions per row of a generator's index relation (``_generator_indices``): an epoch of up to
#: this many rows is one Spark partition, larger ones are spread over the cluster's cores
GENERATOR_SLICE_ROWS = 16_384


def _generator_indices(spark: Any, ranges: list[GeneratorRange]) -> Any:
    """DataFrame ``index bigint`` of the (non-empty) ranges' indices (``position * parallelism + subtask``).

    The ranges travel as rows of a local relation (``start, end, parallelism, subtask``) that
    Spark expands with ``explode(sequence(start, end - 1))``, not as ``spark.range(start, end)``:
    Spark's generated code for a range inlines its bounds as literals, so each epoch of a
    streaming source would compile (Janino) and JIT-compile a class of its own; with the bounds as
    data every epoch reuses one compiled plan. Each range is cut into slices of at most
    ``GENERATOR_SLICE_ROWS`` positions, one row each (a local relation of n rows runs as
    ``min(n, spark.default.parallelism)`` partitions).
    """
    from pyspark.sql import functions as F

    rows = []  # one per slice: start, end (exclusive), parallelism, subtask; every range n > 0
    for r in ranges:
        n = r.end - r.start
        k = -(-n // GENERATOR_SLICE_ROWS)
        bounds = [r.start + n * i // k for i in range(k + 1)]
        rows += [(a, b, r.split.parallelism, r.split.subtask)
                 for a, b in zip(bounds, bounds[1:], strict=False)]
    table = pa.table([pa.array(column, pa.int64()) for column in zip(*rows, strict=True)],
                     names=["start", "end", "p", "s"])
    slices = spark.createDataFrame(table)
    positions = slices.select(F.explode(F.sequence("start", F.col("end") - 1)).alias("pos"),
                              "p", "s")
    return positions.select((F.col("pos") * F.col("p") + F.col("s")).alias("index"))


def _generate(spark: Any, source: DataGeneratorSource, ranges: list[GeneratorRange]) -> SourceRead:
    """``generator_function(index)`` over the ranges' indices, in Spark's Python workers."""
    from flintlock.runtime.spark.python_ops import generator_fn
    from flintlock.runtime.spark.schema import arrow_schema, parse_ddl

    struct = parse_ddl(spark, source.schema)
    ranges = [r for r in ranges if r.end > r.start]
    if not ranges:
        return SourceRead(spark.createDataFrame([], schema=struct))
    df = _generator_indices(spark, ranges)
    mapped = df.mapInArrow(generator_fn(source.function, arrow_schema(struct)), struct)
    return SourceRead(mapped, sum(r.end - r.start for r in ranges))


def _parquet_footers(paths: Sequence[str]) -> list[Any]:
    """The footers (``pyarrow.parquet.FileMetaData``) of the Parquet files ``paths``."""
    import pyarrow.parquet as pq

    from flintlock.runtime.shuffle.layout import filesystem_and_path

    footers = []
    for p in paths:
        fs, path = filesystem_and_path(p)
        with fs.open_input_file(path) as fh:
            footers.append(pq.read_metadata(fh))
    return footers


#: whether a Spark session merges Parquet schemas (``spark.sql.parquet.mergeSchema``), per session
_MERGES_SCHEMAS: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _merges_schemas(spark: Any, options: dict[str, Any]) -> bool:
    """Whether reading Parquet with ``options`` in ``spark`` merges the files' schemas (the
    source's ``mergeSchema`` option, else the session's setting: one RPC per session)."""
    for key, value in options.items():
        if key.lower() == "mergeschema":
            return str(value).lower() == "true"
    try:
        return _MERGES_SCHEMAS[spark]
    except (KeyError, TypeError):
        pass
    merges = str(spark.conf.get("spark.sql.parquet.mergeSchema", "false")).lower() == "true"
    try:
        _MERGES_SCHEMAS[spark] = merges
    except TypeError:  # not weakly referenceable: asked again next time
        pass
    return merges


def _read_files(spark: Any, source: FileSource, splits: list[FileSplit]) -> SourceRead:
    paths = [s.path for s in splits]
    reader = spark.read.format(source.format).options(**source.options)
    if source.schema:
        reader = reader.schema(source.schema)
    if not paths:
        if source.schema:
            return SourceRead(_empty(spark, source.schema))
        # No split here and no declared schema: take the schema from the whole input, no rows.
        return SourceRead(reader.load(source.path).limit(0))
    records = 0
    if source.format == "parquet":
        try:
            footers = _parquet_footers(paths)
        except OSError as exc:
            raise SourceException(f"{source.describe()}: cannot read {paths[0]!r}: {exc}") from exc
        records = sum(f.num_rows for f in footers)
        if not source.schema and not _merges_schemas(spark, source.options):
            # the schema Spark would infer from the first file, without its inference job
            inferred = spark_schema(footers[0])
            if inferred is not None:
                reader = reader.schema(inferred)
    return SourceRead(reader.load(paths), records, sum(s.size for s in splits))


def write_sink(
    df: Any,
    sink: Any,
    *,
    job_id: str,
    attempt: str,
    subtask_index: int,
    parallelism: int,
    print_fn: Callable[[str], None],
    run: Callable[[Callable[[], Any]], Any],
    append: bool = False,
) -> tuple[Any, dict[str, bytes], int]:
    """Write ``df`` to ``sink``; ``run`` executes a Spark action (tagging, cancellation).

    ``append``: add to what this attempt wrote before (a streaming task's later epochs) instead
    of replacing it.

    Returns:
        ``(committable, accumulators, records_out)``.
    """
    if isinstance(sink, FileSink):
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        target = sink.temporary_dir(job_id, attempt)
        observation = Observation(f"rows_{abs(hash(target))}")
        observed = observe(df, observation, F.count(F.lit(1)).alias("rows"))
        writer = observed.write.mode("append" if append else "overwrite").format(sink.format).options(**sink.options)
        run(lambda: writer.save(target))
        try:
            rows = int(observation.get.get("rows", 0))
        except Exception:  # metrics are best effort
            rows = 0
        return target, {}, rows
    if isinstance(sink, PrintSink):
        table = run(lambda: to_arrow(df))
        prefix = sink.line_prefix(subtask_index, parallelism)
        for row in _arrow_rows(table):
            print_fn(f"{prefix}{row!r}")
        return None, {}, table.num_rows
    if isinstance(sink, CollectSink):
        table = run(lambda: to_arrow(df))
        buf = io.BytesIO()
        with pa.ipc.new_stream(buf, table.schema) as writer:
            writer.write_table(table)
        return None, {sink.accumulator_name(subtask_index): buf.getvalue()}, table.num_rows
    raise SinkException(f"unsupported sink {type(sink).__qualname__}: {sink!r}")


def _arrow_rows(table: pa.Table) -> list[Any]:
    from pyspark.sql import Row

    row_cls = Row(*table.schema.names)
    columns = [c.to_pylist() for c in table.columns]
    return [row_cls(*values) for values in zip(*columns, strict=False)] if columns else []
