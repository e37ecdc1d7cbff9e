"""Errors of the shuffle layer (Flink ``io/network/partition/PartitionNotFoundException``)."""

from __future__ import annotations

from flintlock.exceptions import FlintlockException

__all__ = ["PartitionNotFoundException"]


class PartitionNotFoundException(FlintlockException):
    """A consumer could not find a producer's result partition (its files are gone).

    ``partition_not_found`` is the partition id text; ``SerializedError.from_exception`` copies it so
    the JobMaster restarts the producer's region (Flink's PartitionNotFoundException handling).

    Args:
        partition_id: ``str(IntermediateResultPartitionID)`` of the missing partition.
        uri: where it was expected.
    """

    non_recoverable = False

    def __init__(self, partition_id: str, uri: str) -> None:
        super().__init__(f"Partition {partition_id} not found at {uri}")
        self.partition_not_found = str(partition_id)
        self.uri = uri

    def __reduce__(self):  # keep pickling working with the two-argument constructor
        return (type(self), (self.partition_not_found, self.uri))
