"""Warm a TaskManager's fresh Spark server before it takes tasks.

A new Spark JVM runs its first query several times slower than later ones: classes load, whole-stage
code generation compiles, the JIT has seen nothing (measured here: TPC-H Q18 at SF 1 on a fresh
session cluster 24 s, then 10.6, 7.6, 6.8, 6.2 s). ``warm_up`` runs one small plan through what
flintlock's tasks use (a Parquet write partitioned into subpartitions by ``xxhash64``, a scan, a
filter, DECIMAL and count aggregations, a join, a sort with limit, a collect), so the first
user job does not pay for all of that. The TaskManager runs it in the background once it has
registered (``taskmanager.spark.warm-up``): measured on Q18 at SF 1, the first job after
``flintlock cluster start`` takes 14.6 s instead of 21.7 s when the warm-up had finished.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from typing import Any

__all__ = ["warm_up"]

log = logging.getLogger(__name__)

#: rows of the warm-up plan: class loading and code generation need only a few
_ROWS = 20_000


def warm_up(session: Any, scratch_dir: str | None = None) -> float:
    """Run the warm-up plan on ``session`` (a Spark Connect session); returns seconds taken.

    Args:
        session: the TaskManager's Spark session.
        scratch_dir: where the plan writes its Parquet files (a temporary directory under it is
            removed afterwards); the system's temporary directory by default.

    Errors are logged and swallowed: a failed warm-up only means a slower first task.
    """
    from pyspark.sql import functions as F

    started = time.perf_counter()
    path = tempfile.mkdtemp(prefix="flintlock-warm-up-", dir=scratch_dir)
    try:
        rows = session.range(0, _ROWS).select(
            (F.col("id") % 1000).alias("k"),
            (F.col("id") / 7).cast("decimal(15,2)").alias("v"),
            F.concat(F.lit("s"), (F.col("id") % 13).cast("string")).alias("s"),
            F.date_add(F.lit("1995-01-01").cast("date"), (F.col("id") % 365).cast("int")).alias("d"),
        )
        (rows.withColumn("sp", F.pmod(F.xxhash64("k"), F.lit(4)))
         .write.mode("overwrite").partitionBy("sp").parquet(os.path.join(path, "p")))
        read = session.read.parquet(os.path.join(path, "p"))
        totals = (read.filter(F.col("d") > F.lit("1995-03-01").cast("date"))
                  .groupBy("k").agg(F.sum("v").alias("sv"), F.count(F.lit(1)).alias("n"),
                                    F.avg("v").alias("av")))
        names = read.select("k", "s").distinct()
        totals.join(names, "k").orderBy(F.col("sv").desc(), "k").limit(10).collect()
    except Exception:  # a slower first task is all that is lost
        log.warning("Spark warm-up failed", exc_info=True)
    finally:
        shutil.rmtree(path, ignore_errors=True)
    took = time.perf_counter() - started
    log.info("Spark warmed up in %.2f s", took)
    return took
