"""Run-time join decisions of the AdaptiveBatchScheduler: broadcast joins and skewed-join splits (pure).

Follows Flink FLIP-470 (``AdaptiveBroadcastJoinOptimizationStrategy``,
``AdaptiveSkewedJoinOptimizationStrategy``) for a vertex whose chain head is a hash join with two
HASH inputs (gate 0 the left side, gate 1 the right) and whose parallelism is decided at run
time. Both inputs have finished, and their producers wrote ``N`` subpartitions each (contiguous
key-group ranges, equal indices holding equal keys), so:

- **Broadcast.** A side the join type may broadcast (Spark's broadcast hash join rule: inner,
  left, semi and anti joins may broadcast their right side; inner and right joins their left
  side) whose stored bytes are at most ``table.optimizer.adaptive-broadcast-join.threshold``
  (falling back to a set ``table.optimizer.join.broadcast-threshold``) becomes the
  build side: every subtask reads all of it (every producer, subpartitions ``0..N-1``) and the
  join runs as a broadcast join. The other side, the probe side, is cut into subpartition ranges
  by its own volume (the build side counts against at most half of a subtask's volume,
  ``vertex_parallelism_decider``). The smaller eligible side is chosen.
- **Skew.** Otherwise, a subpartition index ``k`` whose bytes on one side exceed both
  ``skewed-factor`` x the median of that side's subpartitions and ``skewed-threshold`` is split:
  several subtasks each read subpartition ``k`` of a contiguous group of that side's producers,
  and subpartition ``k`` of the other side whole. Only a side whose rows the join keeps
  unmatched on that side alone may be split (inner: both; left, semi, anti: left; right: right;
  full: none); where both sides are skewed at ``k``, the larger is split. The runs of other
  subpartitions are cut into ranges by volume as usual. The per-subtask limit grows (bisection)
  until the subtask count is at most the max parallelism; when even one subtask per run and per
  skewed subpartition does not fit, or nothing would be split, there is no skew decision.

No graph, no I/O: stored bytes in, ``ParallelismAndInputInfos`` out (None: no adaptive decision,
the vertex is sized as any other).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from flintlock.config.configuration import Configuration
from flintlock.config.optimizer_options import (
    ADAPTIVE_BROADCAST_JOIN_STRATEGY,
    ADAPTIVE_BROADCAST_JOIN_THRESHOLD,
    RUNTIME_FILTER_ENABLED,
    SKEWED_JOIN_FACTOR,
    SKEWED_JOIN_STRATEGY,
    SKEWED_JOIN_THRESHOLD,
)
from flintlock.config.options import BROADCAST_JOIN_THRESHOLD
from flintlock.runtime.executiongraph.intermediate_result import ConsumedSubpartitions
from flintlock.runtime.operators.specs import BROADCAST_LEFT_JOINS, BROADCAST_RIGHT_JOINS
from flintlock.runtime.scheduler.adaptivebatch.vertex_parallelism_decider import (
    CAP_RATIO_OF_BROADCAST,
    BlockingInputInfo,
    ParallelismAndInputInfos,
    compute_subpartition_ranges,
    decide_parallelism_and_input_infos,
    find_min_legal,
)

__all__ = [
    "AdaptiveJoinSettings",
    "JoinInput",
    "broadcast_side",
    "decide_adaptive_join",
    "skewed_subpartitions",
]

#: join types (``JoinSpec.how``, as the API normalizes them) that may broadcast a side at run
#: time (a cross join is always a broadcast join already)
_BROADCAST_RIGHT = BROADCAST_RIGHT_JOINS - {"cross"}
_BROADCAST_LEFT = BROADCAST_LEFT_JOINS - {"cross"}
#: the sides whose skewed subpartitions a join type may split
_SPLITTABLE = {"inner": ("left", "right"), "left": ("left",), "semi": ("left",),
               "anti": ("left",), "right": ("right",)}


@dataclass(frozen=True)
class AdaptiveJoinSettings:
    """``table.optimizer.adaptive-broadcast-join.strategy`` and ``.threshold`` (bytes, -1 off;
    its fallback key ``table.optimizer.join.broadcast-threshold``) and
    ``table.optimizer.skewed-join-optimization.*`` (bytes)."""

    broadcast_strategy: str = "AUTO"
    broadcast_threshold: int = 2 << 20
    skew_strategy: str = "AUTO"
    skewed_factor: float = 4.0
    skewed_threshold: int = 256 << 20
    #: ``table.optimizer.runtime-filter.enabled``: cut a semi/anti join's right side
    runtime_filter: bool = True

    @classmethod
    def from_configuration(cls, configuration: Configuration) -> AdaptiveJoinSettings:
        return cls(
            broadcast_strategy=configuration.get(ADAPTIVE_BROADCAST_JOIN_STRATEGY),
            broadcast_threshold=configuration.get(
                BROADCAST_JOIN_THRESHOLD
                if configuration.contains(BROADCAST_JOIN_THRESHOLD)
                and not configuration.contains(ADAPTIVE_BROADCAST_JOIN_THRESHOLD)
                else ADAPTIVE_BROADCAST_JOIN_THRESHOLD),
            skew_strategy=configuration.get(SKEWED_JOIN_STRATEGY),
            skewed_factor=configuration.get(SKEWED_JOIN_FACTOR),
            skewed_threshold=configuration.get(SKEWED_JOIN_THRESHOLD),
            runtime_filter=configuration.get(RUNTIME_FILTER_ENABLED),
        )


@dataclass(frozen=True)
class JoinInput:
    """What one finished HASH input of the join stored.

    Attributes:
        bytes_by_partition: ``[producer][subpartition]`` -> bytes (every producer has the same
            number of subpartitions).
    """

    bytes_by_partition: tuple[tuple[int, ...], ...]

    @property
    def producers(self) -> int:
        return len(self.bytes_by_partition)

    @property
    def num_subpartitions(self) -> int:
        return len(self.bytes_by_partition[0]) if self.bytes_by_partition else 0

    def bytes_per_subpartition(self) -> tuple[int, ...]:
        """Bytes per subpartition index, summed over the producers."""
        return tuple(sum(column) for column in zip(*self.bytes_by_partition, strict=True)) \
            if self.bytes_by_partition else ()

    @property
    def num_bytes(self) -> int:
        return sum(sum(row) for row in self.bytes_by_partition)

    def everything(self, start: int, end: int) -> ConsumedSubpartitions:
        """Subpartitions ``start..end`` of every producer."""
        return ConsumedSubpartitions(tuple(range(self.producers)), start, end)


def broadcast_side(how: str, left_bytes: int, right_bytes: int, threshold: int) -> str:
    """``"left"``/``"right"``: the smaller side the join type may broadcast that stored at most
    ``threshold`` bytes; "" when none does or ``threshold`` is negative (off)."""
    if threshold < 0:
        return ""
    candidates = [(size, side) for size, side, allowed in (
        (right_bytes, "right", _BROADCAST_RIGHT), (left_bytes, "left", _BROADCAST_LEFT))
        if how in allowed and size <= threshold]
    return min(candidates)[1] if candidates else ""


def skewed_subpartitions(volumes: Sequence[int], factor: float, threshold: int) -> list[int]:
    """Indices whose bytes exceed both ``factor`` x the median of ``volumes`` and
    ``threshold`` (Flink/Spark's skew rule)."""
    if not volumes:
        return []
    bound = max(threshold, statistics.median(volumes) * factor)
    return [k for k, v in enumerate(volumes) if v > bound]


def decide_adaptive_join(
    how: str,
    left: JoinInput,
    right: JoinInput,
    settings: AdaptiveJoinSettings,
    min_parallelism: int,
    max_parallelism: int,
    data_volume_per_task: int,
) -> ParallelismAndInputInfos | None:
    """The broadcast or skew decision for a hash join vertex (module docstring), or None.

    Args:
        how: the join's ``JoinSpec.how``.
        left, right: the finished inputs of gates 0 and 1.
        settings: strategies and thresholds.
        min_parallelism, max_parallelism: bounds of the vertex (``1 <= min <= max``).
        data_volume_per_task: target bytes per subtask.

    Returns:
        The decision with ``input_infos`` keyed ``"left"``/``"right"`` (the caller maps them to
        dataset ids), or None when neither optimization applies.
    """
    if left.num_subpartitions < 1 or left.num_subpartitions != right.num_subpartitions:
        return None
    if settings.broadcast_strategy != "NONE":
        side = broadcast_side(how, left.num_bytes, right.num_bytes, settings.broadcast_threshold)
        if side:
            return _broadcast(side, left, right, min_parallelism, max_parallelism,
                              data_volume_per_task)
    if settings.skew_strategy != "NONE":
        return _split_skew(how, left, right, settings, min_parallelism, max_parallelism,
                           data_volume_per_task)
    return None


def _broadcast(side: str, left: JoinInput, right: JoinInput, min_p: int, max_p: int,
               volume: int) -> ParallelismAndInputInfos:
    build, probe = (right, left) if side == "right" else (left, right)
    decision = decide_parallelism_and_input_infos(
        [BlockingInputInfo(probe.bytes_per_subpartition()),
         BlockingInputInfo(build.bytes_per_subpartition(), broadcast=True)],
        min_p, max_p, volume)
    probe_reads = tuple(probe.everything(s, e) for s, e in decision.subpartition_ranges)
    build_reads = (build.everything(0, build.num_subpartitions - 1),) * decision.parallelism
    reads = {"left": build_reads, "right": probe_reads} if side == "left" else \
        {"left": probe_reads, "right": build_reads}
    return ParallelismAndInputInfos(
        decision.parallelism, (),
        f"adaptive broadcast join: the {side} side stored {build.num_bytes} bytes; "
        f"{decision.reason} of the {'right' if side == 'left' else 'left'} side",
        input_infos=reads, broadcast_side=side,
        operator_strategy=f"BROADCAST_HASH_JOIN (adaptive, {side} side {build.num_bytes} bytes)")


#: one subtask's reads: ``(start, end, None, 0, 0)`` a subpartition range of every producer of
#: both sides, or ``(k, k, side, first, last)`` subpartition ``k`` of producers ``first..last``
#: of ``side`` and all of the other side's subpartition ``k``
_Read = tuple[int, int, "str | None", int, int]


def _split_skew(how: str, left: JoinInput, right: JoinInput, settings: AdaptiveJoinSettings,
                min_p: int, max_p: int, volume: int) -> ParallelismAndInputInfos | None:
    sides = {"left": left, "right": right}
    per_side = {name: inp.bytes_per_subpartition() for name, inp in sides.items()}
    split: dict[int, str] = {}
    for name in _SPLITTABLE.get(how, ()):
        for k in skewed_subpartitions(per_side[name], settings.skewed_factor,
                                      settings.skewed_threshold):
            if k not in split or per_side[name][k] > per_side[split[k]][k]:
                split[k] = name
    if not split:
        return None
    n = left.num_subpartitions
    totals = [a + b for a, b in zip(per_side["left"], per_side["right"], strict=True)]

    def plan(limit: int) -> list[_Read]:
        reads: list[_Read] = []
        start = 0
        for k in [*sorted(split), n]:
            if start < k:
                reads.extend((start + s, start + e, None, 0, 0)
                             for s, e in compute_subpartition_ranges(totals[start:k], limit))
            if k < n:
                name = split[k]
                other = per_side["right" if name == "left" else "left"][k]
                share = max(1, limit - min(other, int(limit * CAP_RATIO_OF_BROADCAST)))
                column = [row[k] for row in sides[name].bytes_by_partition]
                reads.extend((k, k, name, a, b) for a, b in compute_subpartition_ranges(column, share))
            start = k + 1
        return reads

    reads = plan(volume)
    if len(reads) > max_p:
        reads = plan(find_min_legal(lambda lim: len(plan(lim)) <= max_p, volume,
                                    max(volume, sum(totals))))
    pieces = {k: sum(1 for r in reads if r[2] is not None and r[0] == k) for k in split}
    if not min_p <= len(reads) <= max_p or all(count < 2 for count in pieces.values()):
        return None
    left_reads, right_reads = [], []
    for start, end, split_side, first, last in reads:
        if split_side is None:
            left_reads.append(left.everything(start, end))
            right_reads.append(right.everything(start, end))
            continue
        group = ConsumedSubpartitions(tuple(range(first, last + 1)), start, end)
        left_reads.append(group if split_side == "left" else left.everything(start, end))
        right_reads.append(group if split_side == "right" else right.everything(start, end))
    described = ", ".join(f"{k} ({split[k]}, {pieces[k]} subtasks)" for k in sorted(split)
                          if pieces[k] > 1)
    return ParallelismAndInputInfos(
        len(reads), (), f"skewed join: subpartitions {described} split by producer",
        input_infos={"left": tuple(left_reads), "right": tuple(right_reads)},
        operator_strategy=f"HASH_JOIN (skewed subpartitions split: {described})")
