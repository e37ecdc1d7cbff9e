"""Which executions share which slot request, grouped in bulks (pure bookkeeping).

Follows the bookkeeping of Flink ``SlotSharingExecutionSlotAllocator`` (``SharedSlot``) and
``PhysicalSlotRequestBulk``: the executions of one scheduled region that belong to the same slot
sharing group and subtask index share one slot request, and the requests of one region form a bulk
that is deployed only when every request has a slot. The scheduler core asks the slot pool for the
slots and carries out deployment; this module only remembers who shares what.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from flintlock.runtime.ids import ExecutionAttemptID
from flintlock.runtime.jobmaster.slotpool.declarative_slot_pool import AllocatedSlot, SlotRequestId

__all__ = ["SharedSlotRequest", "SharedSlotRequests", "SlotRequestBulk"]


@dataclass(eq=False)
class SharedSlotRequest:
    """One slot for the executions of one slot sharing group and subtask index in one bulk."""

    id: SlotRequestId
    bulk_id: int
    members: set[ExecutionAttemptID]
    slot: AllocatedSlot | None = None


@dataclass(eq=False)
class SlotRequestBulk:
    """The slot requests of one scheduled region; deployed when all have a slot."""

    id: int
    requests: list[SlotRequestId]
    #: monotonic seconds since the bulk cannot be fulfilled even with every owned slot
    unfulfillable_since: float | None = None


class SharedSlotRequests:
    """The live shared slot requests and the bulks not yet deployed."""

    def __init__(self) -> None:
        self._requests: dict[SlotRequestId, SharedSlotRequest] = {}
        self._request_of: dict[ExecutionAttemptID, SlotRequestId] = {}
        self._bulks: dict[int, SlotRequestBulk] = {}
        self._request_ids = itertools.count(1)
        self._bulk_ids = itertools.count(1)

    def add_bulk(self, groups: Iterable[set[ExecutionAttemptID]]) -> list[SharedSlotRequest]:
        """A new bulk with one shared request per group of attempts; returns the requests."""
        bulk = SlotRequestBulk(next(self._bulk_ids), [])
        self._bulks[bulk.id] = bulk
        requests = []
        for members in groups:
            request = SharedSlotRequest(next(self._request_ids), bulk.id, set(members))
            self._requests[request.id] = request
            bulk.requests.append(request.id)
            for attempt in members:
                self._request_of[attempt] = request.id
            requests.append(request)
        return requests

    def request(self, request_id: SlotRequestId) -> SharedSlotRequest:
        return self._requests[request_id]

    def find(self, request_id: SlotRequestId | None) -> SharedSlotRequest | None:
        return self._requests.get(request_id) if request_id is not None else None

    def bulk(self, bulk_id: int) -> SlotRequestBulk | None:
        return self._bulks.get(bulk_id)

    def bulks(self) -> list[SlotRequestBulk]:
        return list(self._bulks.values())

    def take_ready_bulks(self) -> Iterator[SlotRequestBulk]:
        """Yield and forget each bulk whose requests all have a slot.

        Checked lazily, so the caller may deploy one bulk (and release shares) before the next is
        checked.
        """
        for bulk in list(self._bulks.values()):
            if bulk.id not in self._bulks or any(self._requests[r].slot is None for r in bulk.requests):
                continue
            del self._bulks[bulk.id]
            yield bulk

    def release(self, attempt: ExecutionAttemptID) -> SharedSlotRequest | None:
        """``attempt`` no longer needs its share; returns its request once no member is left."""
        request_id = self._request_of.pop(attempt, None)
        if request_id is None:
            return None
        request = self._requests[request_id]
        request.members.discard(attempt)
        if request.members:
            return None
        del self._requests[request_id]
        bulk = self._bulks.get(request.bulk_id)
        if bulk is not None:
            bulk.requests.remove(request_id)
            if not bulk.requests:
                del self._bulks[bulk.id]
        return request

    def clear_bulks(self) -> None:
        self._bulks.clear()

    def validate(self, is_live: Callable[[ExecutionAttemptID], bool]) -> None:
        """Check that members hold their requests and requests their slots.

        Args:
            is_live: whether an attempt is a current attempt that is not terminal.
        """
        for attempt, request_id in self._request_of.items():
            request = self._requests[request_id]
            assert attempt in request.members
            assert is_live(attempt), f"{attempt}: holds a slot request but is not a live current attempt"
        for request in self._requests.values():
            if request.slot is not None:
                assert request.slot.request_id == request.id, f"request {request.id}: slot mismatch"
