"""BLOCKING result partitions with Spark: write a subtask's output, read a consumer's input gate.

Producer (``write_partition``): the output DataFrame gets a subpartition column ``sp`` computed
from the edge's ShipStrategy, is written once as Parquet with ``partitionBy("sp")`` under the
partition directory (``flintlock.runtime.shuffle.layout``), and its rows/bytes per subpartition
and schema are read back from the Parquet footers (metadata only). Subpartition index:

- HASH: key group ``kg = pmod(xxhash64(keys), max_parallelism)`` (all columns when no keys are
  given), then Flink's ``KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup``:
  ``kg * N // max_parallelism``; consumers read contiguous subpartition ranges.
- REBALANCE / RESCALE: round robin, ``pmod(monotonically_increasing_id() + subtask, N)``.
- FORWARD / GLOBAL / BROADCAST: everything in ``sp=0``.

Consumer (``read_gate``): one ``spark.read.parquet`` over the non-empty ``sp=k`` directories of the
gate's range across all listed partitions, with the gate's schema (no inference job), unioned with
the rows of producers that wrote Arrow IPC files (``PartitionLocation.format == "arrow"``, small
outputs: ``arrow_segments``) handed to Spark with ``createDataFrame``; an empty DataFrame of that
schema when there is nothing to read. Missing partitions raise ``PartitionNotFoundException``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from flintlock.runtime.deployment import (
    InputGateDeploymentDescriptor,
    PartitionLocation,
    ResultPartitionDeploymentDescriptor,
)
from flintlock.runtime.ids import ExecutionAttemptID
from flintlock.runtime.jobgraph.types import ShipStrategy
from flintlock.runtime.operators.specs import OutputSpec
from flintlock.runtime.shuffle.exceptions import PartitionNotFoundException
from flintlock.runtime.shuffle.layout import (
    SUBPARTITION_COLUMN,
    missing_paths,
    partition_stats,
    subpartition_uri,
)
from flintlock.runtime.shuffle.pipelined import ARROW, ARROW_SUFFIX
from flintlock.runtime.spark.schema import struct_from_json, struct_to_ddl

__all__ = ["GateRead", "consumed_only", "read_gate", "read_parquet", "subpartition_column",
           "subpartition_column_clash", "write_partition"]

#: A user column named like the subpartition column is stored under this name.
_SHADOW = "__flintlock_sp__"
_SP_FIELD = re.compile(r"(^|, )`sp` ")

#: How the producer lays out its files: "direct" (the output is coalesced to at most
#: ``spark.sql.shuffle.partitions`` Spark partitions, the cores of the embedded server, and each of
#: them writes its rows into every subpartition directory it has rows for: no Spark shuffle, at most
#: that many files per subpartition) or "repartition" (a Spark shuffle by ``sp`` first: one file
#: per subpartition). One subpartition is always written as one file.
#: Measured (local[2], warm, 1M rows of (bigint, bigint, string), HASH into 8 subpartitions):
#: input in 8 Spark partitions: unbounded direct 1.6-2.2 s / 64 files, repartition 1.1-1.4 s / 8
#: files; input in 2 Spark partitions: direct 1.06-1.08 s / 16 files, repartition 1.33-1.43 s.
#: Whole TPC-H SF1 queries, runs alternating between the layouts (CPU seconds, median of 4):
#: Q3 10.2 (direct) vs 12.3 (repartition), Q18 13.3 vs 14.6, Q1 7.8 vs 7.5 (notes:
#: ``/work/notes/speed-profile.md``). Codecs (snappy, lz4, zstd, none), Parquet without
#: dictionaries and ORC wrote within noise of each other.
WRITE_LAYOUT = "direct"

_write_bound: dict[str, int] = {}


def _write_partitions(df: Any) -> int:
    """The most Spark partitions that write one partition: ``spark.sql.shuffle.partitions``.

    flintlock sets it to the cores of its embedded server (``session.default_spark_settings``).
    Read once per Spark session (one config round trip); 0 (no bound) when unreadable.
    """
    session = df.sparkSession
    key = str(getattr(session, "session_id", id(session)))
    if key not in _write_bound:
        try:
            _write_bound[key] = max(0, int(session.conf.get("spark.sql.shuffle.partitions") or 0))
        except Exception:
            _write_bound[key] = 0
    return _write_bound[key]


def subpartition_column(rpdd: ResultPartitionDeploymentDescriptor, output: OutputSpec,
                        subtask_index: int) -> Any:
    """The Column computing the subpartition index of every row."""
    from pyspark.sql import functions as F

    n = max(1, int(rpdd.number_of_subpartitions))
    strategy = rpdd.ship_strategy
    if strategy == ShipStrategy.HASH and n > 1:
        keys = rpdd.key_columns or output.key_columns
        max_par = int(rpdd.max_parallelism or output.max_parallelism)
        hashed = F.xxhash64(*[F.col(k) for k in keys]) if keys else F.expr("xxhash64(*)")
        key_group = F.pmod(hashed, F.lit(max_par))
        # kg * n < 2**30 and the quotient is exact enough in double for floor().
        return F.floor(key_group * F.lit(n) / F.lit(max_par)).cast("int")
    if strategy in (ShipStrategy.REBALANCE, ShipStrategy.RESCALE) and n > 1:
        return F.pmod(F.monotonically_increasing_id() + F.lit(subtask_index), F.lit(n)).cast("int")
    return F.lit(0)


def write_partition(
    df: Any,
    rpdd: ResultPartitionDeploymentDescriptor,
    output: OutputSpec,
    uri: str,
    attempt_id: ExecutionAttemptID,
    shadow_sp: bool = False,
) -> PartitionLocation:
    """Write ``df`` into the partition directory ``uri`` and describe what was written.

    Args:
        df: the output DataFrame.
        rpdd: the partition to produce (N subpartitions, partitioner, keys).
        output: the chain's output spec (keys, max parallelism fallback).
        uri: the partition directory (``shuffle.layout.partition_uri``).
        attempt_id: the producing attempt.
        shadow_sp: store a user column named ``sp`` as ``__flintlock_sp__`` (set by the caller
            after Spark reported a duplicate ``sp`` column).

    Returns:
        The ``PartitionLocation`` with rows/bytes per subpartition and the DDL schema.
    """
    from pyspark.sql import functions as F

    n = max(1, int(rpdd.number_of_subpartitions))
    sp = subpartition_column(rpdd, output, attempt_id.subtask_index)
    if shadow_sp:
        framed = (df.select(F.col("*"), sp.alias("__flintlock_sp_new__"))
                  .withColumnRenamed(SUBPARTITION_COLUMN, _SHADOW)
                  .withColumnRenamed("__flintlock_sp_new__", SUBPARTITION_COLUMN))
    else:
        framed = df.select(F.col("*"), sp.alias(SUBPARTITION_COLUMN))
    if n == 1:  # one file: a sorted output keeps its order for the consumer
        framed = framed.coalesce(1)
    elif WRITE_LAYOUT == "repartition":
        framed = framed.repartition(n, F.col(SUBPARTITION_COLUMN))
    elif (bound := _write_partitions(df)) > 0:
        framed = framed.coalesce(bound)
    framed.write.mode("overwrite").partitionBy(SUBPARTITION_COLUMN).parquet(uri)
    rows, sizes, schema_json = partition_stats(uri, n)
    if schema_json is not None:
        ddl = struct_to_ddl(struct_from_json(schema_json))
    else:
        ddl = struct_to_ddl(df.schema)  # nothing written: one analysis round trip
    if shadow_sp:
        ddl = ddl.replace(f"`{_SHADOW}` ", f"`{SUBPARTITION_COLUMN}` ")
    return PartitionLocation(
        partition_id=rpdd.partition_id,
        producer_attempt=attempt_id,
        uri=uri,
        rows_per_subpartition=tuple(rows),
        bytes_per_subpartition=tuple(sizes),
        schema=ddl,
    )


def _literal_pattern(name: str) -> str:
    """``name`` as a Java regular expression that matches it literally (ASCII punctuation and
    spaces escaped; a backslash before a letter or digit would be a class or an error)."""
    return "".join("\\" + ch if ord(ch) < 128 and not (ch.isalnum() or ch == "_") else ch
                   for ch in name)


def consumed_only(df: Any, columns: tuple[str, ...] | None) -> Any:
    """``df`` projected to those of its columns its consumer reads (``OutputSpec.columns``,
    lower-case names; ``graph.column_pruning``), in ``df``'s column order, or ``df`` itself
    when ``columns`` is None. Keeps one column when the consumer reads none (it still counts
    rows; one analysis round trip). Otherwise no round trip: the projection is one
    case-insensitive regular expression over the names (Spark's ``colRegex``), which Spark
    expands against the plan's output where the write is analysed anyway; duplicate names
    are kept as they are."""
    if columns is None:
        return df
    from pyspark.sql import functions as F

    if not columns:
        names = list(df.columns)
        return df.select(F.col("`" + names[0].replace("`", "``") + "`")) if len(names) > 1 else df
    pattern = "(?iu)(" + "|".join(_literal_pattern(c) for c in sorted(columns)) + ")"
    return df.select(df.colRegex("`" + pattern.replace("`", "``") + "`"))


@dataclass(frozen=True)
class GateRead:
    """A gate's DataFrame plus what it reads (rows and bytes, from the producers' statistics)
    and its schema as a DDL string (``""`` when unknown)."""

    df: Any
    rows: int
    bytes: int
    schema: str = ""


def read_gate(spark: Any, gate: InputGateDeploymentDescriptor) -> GateRead:
    """Read the gate's subpartition range across all its partitions.

    Raises:
        PartitionNotFoundException: a listed partition (or one of its non-empty subpartitions)
            no longer exists.
    """
    start, end = gate.subpartition_start, gate.subpartition_end
    if gate.ship_strategy == ShipStrategy.BROADCAST:
        start, end = 0, 0
    dirs: list[str] = []
    arrow_files: list[str] = []
    owners: dict[str, PartitionLocation] = {}
    rows = size = 0
    for loc in gate.partitions:
        owners[loc.uri] = loc
        for k in range(start, end + 1):
            if k < len(loc.rows_per_subpartition) and loc.rows_per_subpartition[k] > 0:
                if loc.format == ARROW:
                    path = subpartition_uri(loc.uri, k) + ARROW_SUFFIX
                    arrow_files.append(path)
                else:
                    path = subpartition_uri(loc.uri, k)
                    dirs.append(path)
                owners[path] = loc
                rows += loc.rows_per_subpartition[k]
                size += loc.bytes_per_subpartition[k] if k < len(loc.bytes_per_subpartition) else 0
    missing = missing_paths([loc.uri for loc in gate.partitions] + dirs + arrow_files)
    if missing:
        loc = owners[missing[0]]
        raise PartitionNotFoundException(str(loc.partition_id), missing[0])
    schema = gate.schema or (gate.partitions[0].schema if gate.partitions else "")
    if not dirs and not arrow_files:
        df = spark.createDataFrame([], schema=schema)
        return GateRead(df, 0, 0, schema)
    frames = [read_parquet(spark, dirs, schema)] if dirs else []
    if arrow_files:
        from flintlock.runtime.spark.arrow_segments import read_arrow_segments

        frames.append(read_arrow_segments(spark, arrow_files, schema))
    df = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    return GateRead(df, rows, size, schema)


def subpartition_column_clash(exc: BaseException) -> bool:
    """Whether a partition write failed because the output has a user column named like the
    subpartition column (Spark's ``AMBIGUOUS_REFERENCE`` / ``COLUMN_ALREADY_EXISTS`` on `sp`):
    the caller writes again with ``write_partition(..., shadow_sp=True)``."""
    text = str(exc)
    return f"`{SUBPARTITION_COLUMN}`" in text and (
        "AMBIGUOUS_REFERENCE" in text or "COLUMN_ALREADY_EXISTS" in text)


def read_parquet(spark: Any, dirs: list[str], schema: str) -> Any:
    """One DataFrame over Parquet subpartition directories, typed ``schema`` (DDL; no
    inference); a user column named like the subpartition column is read back from the name
    ``write_partition(..., shadow_sp=True)`` stored it under."""
    shadow = bool(_SP_FIELD.search(schema))
    file_schema = _SP_FIELD.sub(lambda m: f"{m.group(1)}`{_SHADOW}` ", schema) if shadow else schema
    df = spark.read.schema(file_schema).parquet(*dirs)
    return df.withColumnRenamed(_SHADOW, SUBPARTITION_COLUMN) if shadow else df


def owner_of_missing_path(gate: InputGateDeploymentDescriptor, message: str) -> PartitionLocation | None:
    """The partition whose directory a Spark PATH_NOT_FOUND error names (race after the check)."""
    for loc in gate.partitions:
        if loc.uri.rstrip("/").split("://")[-1] in message:
            return loc
    return None
