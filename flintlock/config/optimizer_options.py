"""Run-time join optimizations of the AdaptiveBatchScheduler (Flink ``OptimizerConfigOptions``,
FLIP-470: adaptive broadcast join and adaptive skewed join).

Registered in ``OPTIONS`` when ``flintlock.config.options`` is imported. Keys, values and defaults
follow Flink's. The compile-time broadcast threshold is
``table.optimizer.join.broadcast-threshold`` (``options.BROADCAST_JOIN_THRESHOLD``), as in Flink;
run-time decisions compare the bytes a finished input stored with
``table.optimizer.adaptive-broadcast-join.threshold``.
"""

from __future__ import annotations

from typing import Any

from flintlock.config.options import (
    _at_least,
    _bool,
    _bytes_or_off,
    _enum,
    _float,
    option,
    parse_memory_bytes,
)

__all__ = [
    "ADAPTIVE_BROADCAST_JOIN_STRATEGY",
    "ADAPTIVE_BROADCAST_JOIN_THRESHOLD",
    "RUNTIME_FILTER_ENABLED",
    "SKEWED_JOIN_FACTOR",
    "SKEWED_JOIN_STRATEGY",
    "SKEWED_JOIN_THRESHOLD",
]


def _factor(value: Any) -> float:
    number = _float(value)
    if number < 1.0:
        raise ValueError(f"{value!r} is below 1")
    return number


ADAPTIVE_BROADCAST_JOIN_STRATEGY = option(
    "table.optimizer.adaptive-broadcast-join.strategy", "AUTO",
    _enum("AUTO", "RUNTIME_ONLY", "NONE"),
    "When a hash join becomes a broadcast join: AUTO at compile time (estimated sizes) and at run "
    "time (the bytes a finished input stored, AdaptiveBatchScheduler only); RUNTIME_ONLY only "
    "at run time; NONE only at compile time. The size limits are "
    "table.optimizer.join.broadcast-threshold (compile time) and "
    "table.optimizer.adaptive-broadcast-join.threshold (run time).")
ADAPTIVE_BROADCAST_JOIN_THRESHOLD = option(
    "table.optimizer.adaptive-broadcast-join.threshold", 2 << 20, _bytes_or_off,
    "Largest size (bytes, as the finished input stored it: compressed Parquet or Arrow, about "
    "a fifth of Spark's in-memory rows) of a hash join's input that the AdaptiveBatchScheduler "
    "broadcasts at run time, moving the join into the other side's producer when that one has "
    "not started. The default, 2 MiB, is about what Spark's own adaptive execution broadcasts "
    "(spark.sql.adaptive.autoBroadcastJoinThreshold, 10 MB of rows in memory). Unset, a set "
    "table.optimizer.join.broadcast-threshold applies; -1 turns run-time broadcasts off.")
RUNTIME_FILTER_ENABLED = option(
    "table.optimizer.runtime-filter.enabled", True, _bool,
    "Cut the right side of a semi or anti join, in its producer, to the rows whose keys the "
    "left side has, when the left side finished first and stored at most "
    "table.optimizer.adaptive-broadcast-join.threshold (Flink's runtime filter, FLIP-324, with "
    "an exact key set). On by default, unlike Flink: the cut costs a broadcast of a side "
    "already known to be small, and TPC-H Q4 takes 0.6x the time with it.")
SKEWED_JOIN_STRATEGY = option(
    "table.optimizer.skewed-join-optimization.strategy", "AUTO",
    _enum("AUTO", "FORCED", "NONE"),
    "Split skewed subpartitions of a hash join's input across several subtasks at run time "
    "(AdaptiveBatchScheduler), each reading a share of the skewed side's producers and the "
    "other side's matching subpartition whole. AUTO and FORCED both split (a split never adds "
    "an exchange in flintlock); NONE turns it off.")
SKEWED_JOIN_FACTOR = option(
    "table.optimizer.skewed-join-optimization.skewed-factor", 4.0, _factor,
    "A subpartition is skewed when its bytes exceed this many times the median subpartition's "
    "and skewed-threshold.")
SKEWED_JOIN_THRESHOLD = option(
    "table.optimizer.skewed-join-optimization.skewed-threshold", 256 << 20,
    _at_least(parse_memory_bytes, 1),
    "Least bytes of a skewed subpartition ('256m' or a number of bytes).")
