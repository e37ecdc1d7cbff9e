"""Run-time join optimizations of the AdaptiveBatchScheduler (Flink ``OptimizerConfigOptions``,
FLIP-470: adaptive broadcast join and adaptive skewed join).

Registered in ``OPTIONS`` when ``flintlock.config.options`` is imported. Keys, values and defaults
follow Flink's. The broadcast threshold is the compile-time one,
``table.optimizer.join.broadcast-threshold`` (``options.BROADCAST_JOIN_THRESHOLD``), as in Flink.
"""

from __future__ import annotations

from typing import Any

from flintlock.config.options import _at_least, _enum, _float, option, parse_memory_bytes

__all__ = [
    "ADAPTIVE_BROADCAST_JOIN_STRATEGY",
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
    "at run time; NONE only at compile time. The size limit is "
    "table.optimizer.join.broadcast-threshold.")
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
