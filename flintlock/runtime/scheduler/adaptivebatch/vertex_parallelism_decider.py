"""Decides an automatically sized job vertex's parallelism and what each subtask reads (pure).

Follows Flink ``DefaultVertexParallelismAndInputInfosDecider`` (fact sheet 7.4), for a vertex whose
inputs are all BLOCKING and finished:

- Every input is *all-to-all* (HASH, REBALANCE, BROADCAST) and not all are broadcast: the
  subpartitions of the non-broadcast inputs (their bytes summed over the producers' partitions
  and over those inputs, index by index, since equal indices hold equal keys) are cut greedily,
  in index order, into contiguous ranges of at most ``avg-data-volume-per-task`` bytes minus the
  broadcast inputs' bytes (capped at half of it); the number of ranges is the parallelism. A
  count outside ``[min, max]`` is brought to the closest legal one by a bisection over the
  per-subtask limit; when none exists, the fallback below applies.
- Otherwise (pointwise inputs, only broadcast inputs, or the fallback): parallelism =
  ``ceil(non-broadcast bytes / avg-data-volume-per-task)`` clamped to ``[min, max]`` (``min``
  when every input is broadcast), and subtask ``i`` of ``p`` reads the even share
  ``[i*N//p, max(i*N//p, (i+1)*N//p - 1)]`` of the ``N`` subpartitions (Flink
  ``VertexInputInfoComputationUtils.computeConsumedSubpartitionRange``).

No graph, no I/O: volumes in, ``ParallelismAndInputInfos`` out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flintlock.runtime.executiongraph.intermediate_result import ConsumedSubpartitions

__all__ = [
    "BlockingInputInfo",
    "ParallelismAndInputInfos",
    "compute_subpartition_ranges",
    "decide_parallelism",
    "decide_parallelism_and_input_infos",
    "even_subpartition_ranges",
    "find_max_legal",
    "find_min_legal",
]

#: Flink's ``CAP_RATIO_OF_BROADCAST``: broadcast bytes count against at most this share of a
#: subtask's data volume.
CAP_RATIO_OF_BROADCAST = 0.5


@dataclass(frozen=True)
class BlockingInputInfo:
    """What one finished BLOCKING input produced (Flink ``BlockingResultInfo``).

    Attributes:
        bytes_per_subpartition: bytes stored per subpartition index, summed over the producer
            partitions (one entry per subpartition; all partitions have the same count).
        broadcast: every consumer subtask reads all of it (BROADCAST edge).
        pointwise: FORWARD/RESCALE edge (consumers read whole partitions, not index ranges).
    """

    bytes_per_subpartition: tuple[int, ...]
    broadcast: bool = False
    pointwise: bool = False

    @property
    def num_bytes(self) -> int:
        return sum(self.bytes_per_subpartition)

    @property
    def num_subpartitions(self) -> int:
        return len(self.bytes_per_subpartition)


@dataclass(frozen=True)
class ParallelismAndInputInfos:
    """The decision: ``parallelism`` and, per subtask, the inclusive subpartition range it reads
    of every all-to-all non-broadcast input (broadcast inputs are read whole).

    ``input_infos`` (adaptive joins, ``adaptive_join``): dataset id -> what each subtask reads of
    that input, by subtask index; it replaces ``subpartition_ranges`` for those inputs (Flink's
    ``JobVertexInputInfo`` per consumed result). ``broadcast_side``: ``"left"``/``"right"`` when
    the vertex's hash join runs as a broadcast join of that side. ``operator_strategy``: what
    the plan shows for the vertex ("" when nothing changed).
    """

    parallelism: int
    subpartition_ranges: tuple[tuple[int, int], ...]
    #: how it was decided ("balanced by data volume" or "even split ...") for logs and REST
    reason: str = ""
    input_infos: Mapping[Any, tuple[ConsumedSubpartitions, ...]] = field(default_factory=dict)
    broadcast_side: str = ""
    operator_strategy: str = ""


def decide_parallelism(inputs: Sequence[BlockingInputInfo], min_parallelism: int,
                       max_parallelism: int, data_volume_per_task: int) -> int:
    """``ceil(non-broadcast bytes / data_volume_per_task)`` clamped to ``[min, max]``;
    ``min`` when every input is broadcast (Flink ``decideParallelism``)."""
    non_broadcast = [i for i in inputs if not i.broadcast]
    if not non_broadcast:
        return min_parallelism
    total = sum(i.num_bytes for i in non_broadcast)
    wanted = math.ceil(total / data_volume_per_task)
    return max(min_parallelism, min(max_parallelism, wanted))


def compute_subpartition_ranges(volumes: Sequence[int], limit: int) -> list[tuple[int, int]]:
    """Greedy contiguous ranges of at most ``limit`` bytes (a single subpartition may exceed it;
    Flink ``computeSubpartitionRanges``). ``volumes`` must not be empty."""
    ranges: list[tuple[int, int]] = []
    start, acc = 0, 0
    for i, v in enumerate(volumes):
        if i == start or acc + v <= limit:
            acc += v
        else:
            ranges.append((start, i - 1))
            start, acc = i, v
    ranges.append((start, len(volumes) - 1))
    return ranges


def even_subpartition_ranges(num_subpartitions: int, parallelism: int) -> tuple[tuple[int, int], ...]:
    """Subtask ``i`` reads ``[i*N//p, max(start, (i+1)*N//p - 1)]`` (empty shares repeat an index
    only when ``p > N``, which the callers prevent)."""
    out = []
    for i in range(parallelism):
        start = i * num_subpartitions // parallelism
        nxt = (i + 1) * num_subpartitions // parallelism
        out.append((start, max(start, nxt - 1)))
    return tuple(out)


def find_max_legal(ok: Callable[[int], bool], low: int, high: int) -> int:
    """Largest value in ``[low, high]`` with ``ok`` (``ok`` monotone true-then-false); ``low``
    when none (Flink ``BisectionSearchUtils.findMaxLegalValue``)."""
    while low < high:
        mid = (low + high + 1) // 2
        if ok(mid):
            low = mid
        else:
            high = mid - 1
    return low


def find_min_legal(ok: Callable[[int], bool], low: int, high: int) -> int:
    """Smallest value in ``[low, high]`` with ``ok`` (false-then-true); ``high`` when none."""
    while low < high:
        mid = (low + high) // 2
        if ok(mid):
            high = mid
        else:
            low = mid + 1
    return high


def _balanced(volumes: Sequence[int], limit: int, min_p: int, max_p: int) -> list[tuple[int, int]] | None:
    """Ranges by data volume with a count in ``[min_p, max_p]``, or None (Flink
    ``adjustToClosestLegalParallelism``)."""
    def count(lim: int) -> int:
        return len(compute_subpartition_ranges(volumes, lim))

    ranges = compute_subpartition_ranges(volumes, limit)
    if min_p <= len(ranges) <= max_p:
        return ranges
    low, high = max(0, min(volumes)), max(1, sum(volumes))
    if len(ranges) < min_p:
        # the largest limit still giving >= min_p ranges, then the smallest limit giving that
        # same count (smaller limits spread the data more evenly)
        adjusted = find_max_legal(lambda v: count(v) >= min_p, low, limit)
        reached = count(adjusted)
        adjusted = find_min_legal(lambda v: count(v) == reached, low, adjusted)
    else:
        adjusted = find_min_legal(lambda v: count(v) <= max_p, limit, high)
    ranges = compute_subpartition_ranges(volumes, adjusted)
    return ranges if min_p <= len(ranges) <= max_p else None


def decide_parallelism_and_input_infos(
    inputs: Sequence[BlockingInputInfo],
    min_parallelism: int,
    max_parallelism: int,
    data_volume_per_task: int,
) -> ParallelismAndInputInfos:
    """The parallelism of an automatically sized vertex and each subtask's subpartition range.

    Args:
        inputs: one entry per input gate (all finished); at least one.
        min_parallelism: lower bound (>= 1).
        max_parallelism: upper bound (>= min); also at most the inputs' subpartition count when
            the ranges are index ranges.
        data_volume_per_task: target bytes per subtask
            (``execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task``).

    Raises:
        ValueError: no inputs, bounds out of order, or all-to-all inputs with different
            subpartition counts.
    """
    if not inputs:
        raise ValueError("an automatically sized vertex needs at least one input")
    if not 1 <= min_parallelism <= max_parallelism:
        raise ValueError(f"parallelism bounds out of order: [{min_parallelism}, {max_parallelism}]")
    ranged = [i for i in inputs if not i.broadcast and not i.pointwise]
    counts = {i.num_subpartitions for i in ranged}
    if len(counts) > 1:
        raise ValueError(f"all-to-all inputs have different subpartition counts {sorted(counts)}")
    n = counts.pop() if counts else 0
    if n:
        max_parallelism = min(max_parallelism, n)
        min_parallelism = min(min_parallelism, max_parallelism)
    all_to_all = all(not i.pointwise for i in inputs)
    if all_to_all and ranged:
        volumes = [sum(i.bytes_per_subpartition[k] for i in ranged) for k in range(n)]
        broadcast_bytes = min(sum(i.num_bytes for i in inputs if i.broadcast),
                              int(data_volume_per_task * CAP_RATIO_OF_BROADCAST))
        limit = max(1, data_volume_per_task - broadcast_bytes)
        ranges = _balanced(volumes, limit, min_parallelism, max_parallelism)
        if ranges is not None:
            return ParallelismAndInputInfos(len(ranges), tuple(ranges), "balanced by data volume")
    p = decide_parallelism(inputs, min_parallelism, max_parallelism, data_volume_per_task)
    return ParallelismAndInputInfos(
        p, even_subpartition_ranges(n, p) if n else (), "even split of the subpartitions")
