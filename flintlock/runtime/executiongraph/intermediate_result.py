"""IntermediateResult / IntermediateResultPartition and the static subpartition mapping.

Follows Flink ``IntermediateResult``, ``IntermediateResultPartition`` and
``VertexInputInfoComputationUtils`` (fact sheet 2.3): one partition per *producer* subtask; the
number of subpartitions a partition has and the ``[start, end]`` subpartition range each consumer
subtask reads depend on the edge's ship strategy:

====================  ==========================  ============================================
ship strategy         subpartitions (N)           consumer ``i`` reads
====================  ==========================  ============================================
HASH, REBALANCE       consumer parallelism        ``[i, i]`` of every producer partition
BROADCAST             1                           ``[0, 0]`` of every producer partition
GLOBAL (C must be 1)  1                           ``[0, 0]`` of every producer partition
FORWARD (P == C)      1                           ``[0, 0]`` of partition ``i``
RESCALE, P >= C       1                           ``[0, 0]`` of partitions
                                                  ``floor(i*P/C) .. floor((i+1)*P/C) - 1``
RESCALE, P < C        consumers fed by ``p``:     its position among the consumers of the one
                      ``ceil(p*C/P)``..           producer ``p`` that feeds it
                      ``ceil((p+1)*C/P) - 1``
====================  ==========================  ============================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from flintlock.runtime.deployment import PartitionLocation
from flintlock.runtime.ids import ExecutionVertexID, IntermediateResultPartitionID
from flintlock.runtime.jobgraph.job_graph import IntermediateDataSet
from flintlock.runtime.jobgraph.types import ResultPartitionType, ShipStrategy

__all__ = [
    "ConsumedSubpartitions",
    "IntermediateResult",
    "IntermediateResultPartition",
    "SubpartitionMapping",
    "compute_subpartition_mapping",
    "dynamic_subpartition_mapping",
    "explicit_subpartition_mapping",
]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class ConsumedSubpartitions:
    """What one consumer subtask reads through one input gate."""

    #: producer partition numbers (= producer subtask indices), ascending
    partition_numbers: tuple[int, ...]
    #: first subpartition index read from each of those partitions (inclusive)
    subpartition_start: int
    #: last subpartition index read (inclusive)
    subpartition_end: int


@dataclass(frozen=True)
class SubpartitionMapping:
    """How one edge connects ``P`` producer partitions to ``C`` consumer subtasks."""

    #: number of subpartitions of each producer partition, by partition number
    subpartitions_per_partition: tuple[int, ...]
    #: what each consumer subtask reads, by consumer subtask index
    consumed: tuple[ConsumedSubpartitions, ...]


def compute_subpartition_mapping(
    ship_strategy: ShipStrategy, producers: int, consumers: int
) -> SubpartitionMapping:
    """The static-graph mapping of fact sheet 2.3 (table in the module docstring).

    Raises:
        ValueError: FORWARD between different parallelisms, or GLOBAL into parallelism > 1.
    """
    if producers < 1 or consumers < 1:
        raise ValueError(f"parallelism must be >= 1 (producers={producers}, consumers={consumers})")
    all_partitions = tuple(range(producers))
    if ship_strategy in (ShipStrategy.HASH, ShipStrategy.REBALANCE):
        return SubpartitionMapping(
            (consumers,) * producers,
            tuple(ConsumedSubpartitions(all_partitions, i, i) for i in range(consumers)),
        )
    if ship_strategy is ShipStrategy.GLOBAL and consumers != 1:
        raise ValueError(
            f"GLOBAL partitioning sends everything to one subtask, but the consumer has "
            f"parallelism {consumers}"
        )
    if ship_strategy in (ShipStrategy.BROADCAST, ShipStrategy.GLOBAL):
        return SubpartitionMapping(
            (1,) * producers,
            tuple(ConsumedSubpartitions(all_partitions, 0, 0) for _ in range(consumers)),
        )
    if ship_strategy is ShipStrategy.FORWARD:
        if producers != consumers:
            raise ValueError(
                f"FORWARD partitioning does not allow a change of parallelism "
                f"({producers} -> {consumers}); use rebalance() or rescale()"
            )
        return SubpartitionMapping(
            (1,) * producers,
            tuple(ConsumedSubpartitions((i,), 0, 0) for i in range(consumers)),
        )
    if ship_strategy is ShipStrategy.RESCALE:
        if producers >= consumers:
            consumed = tuple(
                ConsumedSubpartitions(
                    tuple(range(i * producers // consumers, (i + 1) * producers // consumers)), 0, 0
                )
                for i in range(consumers)
            )
            return SubpartitionMapping((1,) * producers, consumed)
        counts: list[int] = []
        reads: list[ConsumedSubpartitions] = []
        for p in range(producers):
            start = _ceil_div(p * consumers, producers)
            end = _ceil_div((p + 1) * consumers, producers) - 1
            counts.append(end - start + 1)
            reads.extend(ConsumedSubpartitions((p,), c - start, c - start) for c in range(start, end + 1))
        return SubpartitionMapping(tuple(counts), tuple(reads))
    raise ValueError(f"unsupported ship strategy {ship_strategy}")  # pragma: no cover


def dynamic_subpartition_mapping(
    ship_strategy: ShipStrategy, producers: int, consumers: int, subpartitions: int,
    ranges: Sequence[tuple[int, int]] | None = None,
) -> SubpartitionMapping:
    """The mapping of an edge into a consumer sized at run time (Flink's dynamic-graph
    ``VertexInputInfoComputationUtils``): producers wrote ``subpartitions`` subpartitions each
    without knowing ``consumers``.

    HASH/REBALANCE: consumer ``i`` reads ``ranges[i]`` of every partition (default: the even
    split ``[i*N//C, (i+1)*N//C - 1]``); BROADCAST/GLOBAL/FORWARD/RESCALE: as in the static
    table (producers wrote one subpartition each, so RESCALE needs ``consumers <= producers``).

    Raises:
        ValueError: a range count other than ``consumers``, a range outside the subpartitions,
            more consumers than subpartitions, or a parallelism the edge does not allow.
    """
    if ship_strategy in (ShipStrategy.HASH, ShipStrategy.REBALANCE):
        if consumers > subpartitions:
            raise ValueError(f"{consumers} consumers but only {subpartitions} subpartitions")
        if ranges is None:
            ranges = [(i * subpartitions // consumers, (i + 1) * subpartitions // consumers - 1)
                      for i in range(consumers)]
        if len(ranges) != consumers:
            raise ValueError(f"{len(ranges)} subpartition ranges for {consumers} consumers")
        for start, end in ranges:
            if not 0 <= start <= end < subpartitions:
                raise ValueError(f"subpartition range [{start}, {end}] outside 0..{subpartitions - 1}")
        everything = tuple(range(producers))
        return SubpartitionMapping(
            (subpartitions,) * producers,
            tuple(ConsumedSubpartitions(everything, s, e) for s, e in ranges))
    if ship_strategy is ShipStrategy.RESCALE and consumers > producers:
        raise ValueError(f"RESCALE into {consumers} consumers from {producers} producers that "
                         "wrote one subpartition each")
    return compute_subpartition_mapping(ship_strategy, producers, consumers)


def explicit_subpartition_mapping(
    producers: int, subpartitions: int, consumed: Sequence[ConsumedSubpartitions],
) -> SubpartitionMapping:
    """The mapping of an all-to-all edge whose consumers' reads were decided one by one (the
    adaptive joins' broadcast reads and skewed-subpartition splits; Flink's
    ``JobVertexInputInfo``): consumer ``i`` reads ``consumed[i]``.

    Raises:
        ValueError: a read names no producer or one outside ``0..producers-1``, or a
            subpartition range outside ``0..subpartitions-1``.
    """
    for c in consumed:
        if not c.partition_numbers or not all(0 <= n < producers for n in c.partition_numbers):
            raise ValueError(f"a consumer reads partitions {c.partition_numbers} of {producers}")
        if not 0 <= c.subpartition_start <= c.subpartition_end < subpartitions:
            raise ValueError(f"subpartition range [{c.subpartition_start}, "
                             f"{c.subpartition_end}] outside 0..{subpartitions - 1}")
    return SubpartitionMapping((subpartitions,) * producers, tuple(consumed))


@dataclass(eq=False)
class IntermediateResultPartition:
    """The partition one producer subtask writes for one IntermediateDataSet."""

    id: IntermediateResultPartitionID
    producer: ExecutionVertexID
    result_type: ResultPartitionType
    number_of_subpartitions: int
    #: consumer subtasks that read this partition
    consumers: tuple[ExecutionVertexID, ...] = ()
    #: True once the producer's current attempt FINISHED (all data produced)
    finished: bool = False
    #: where the finished producer stored it (from ``TaskResult.partitions``)
    location: PartitionLocation | None = None
    #: why a finished partition is no longer available (its TaskManager was lost), else None
    lost_cause: str | None = None

    @property
    def partition_number(self) -> int:
        return self.id.partition_number

    @property
    def available(self) -> bool:
        """Finished and still stored where its producer reported it."""
        return self.finished and self.location is not None

    def mark_lost(self, cause: str) -> None:
        """Its files are gone (Flink ``JobMasterPartitionTracker.stopTrackingPartitionsFor``).

        It stays ``finished`` (the producer's attempt did finish) but has no location any more, so
        region failover restarts its producer and a consumer deployed later fails with a
        PartitionNotFound-style error naming it.
        """
        self.location = None
        self.lost_cause = cause

    def reset_for_new_execution(self) -> None:
        """The producer restarts: the partition is produced again."""
        self.finished = False
        self.location = None
        self.lost_cause = None


@dataclass(eq=False)
class IntermediateResult:
    """One IntermediateDataSet expanded to one partition per producer subtask."""

    dataset: IntermediateDataSet
    #: None until the consumer of a dynamic graph is initialized
    mapping: SubpartitionMapping | None
    partitions: list[IntermediateResultPartition] = field(default_factory=list)

    @property
    def id(self) -> object:
        return self.dataset.id

    @property
    def result_type(self) -> ResultPartitionType:
        return self.dataset.result_type

    def all_finished(self) -> bool:
        return all(p.finished for p in self.partitions)
