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

from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
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
    #: the slot sharing group's resources (UNKNOWN: a default slot)
    resource_profile: ResourceProfile = ResourceProfile.UNKNOWN


@dataclass(eq=False)
class SlotRequestBulk:
    """The slot requests of one scheduled region; deployed when all have a slot."""

    id: int
    #: the bulk's live requests (insertion-ordered set)
    requests: dict[SlotRequestId, None]
    #: monotonic seconds since the bulk cannot be fulfilled even with every owned slot
    unfulfillable_since: float | None = None
    #: how many of ``requests`` have no slot yet (the bulk is ready at 0)
    missing: int = 0


class SharedSlotRequests:
    """The live shared slot requests and the bulks not yet deployed."""

    def __init__(self) -> None:
        self._requests: dict[SlotRequestId, SharedSlotRequest] = {}
        self._request_of: dict[ExecutionAttemptID, SlotRequestId] = {}
        self._bulks: dict[int, SlotRequestBulk] = {}
        #: ids of bulks whose requests all have a slot (``missing == 0``), not yet taken
        self._ready: set[int] = set()
        self._request_ids = itertools.count(1)
        self._bulk_ids = itertools.count(1)

    def add_bulk(self, groups: Iterable[set[ExecutionAttemptID]]) -> list[SharedSlotRequest]:
        """A new bulk with one shared request per group of attempts; returns the requests."""
        bulk = SlotRequestBulk(next(self._bulk_ids), {})
        self._bulks[bulk.id] = bulk
        requests = []
        for members in groups:
            request = SharedSlotRequest(next(self._request_ids), bulk.id, set(members))
            self._requests[request.id] = request
            bulk.requests[request.id] = None
            bulk.missing += 1
            for attempt in members:
                self._request_of[attempt] = request.id
            requests.append(request)
        self._update_ready(bulk)
        return requests

    def _update_ready(self, bulk: SlotRequestBulk) -> None:
        if bulk.missing == 0 and bulk.id in self._bulks:
            self._ready.add(bulk.id)
        else:
            self._ready.discard(bulk.id)

    def assign(self, request: SharedSlotRequest, slot: AllocatedSlot | None) -> None:
        """Set (or, with None, take away) the slot of ``request``; keeps its bulk's count."""
        if (request.slot is None) != (slot is None):
            bulk = self._bulks.get(request.bulk_id)
            if bulk is not None:
                bulk.missing += 1 if slot is None else -1
                self._update_ready(bulk)
        request.slot = slot

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
        for bulk_id in sorted(self._ready):
            bulk = self._bulks.get(bulk_id)
            if bulk is None or bulk.missing:
                continue
            del self._bulks[bulk_id]
            self._ready.discard(bulk_id)
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
            del bulk.requests[request_id]
            if request.slot is None:
                bulk.missing -= 1
            if not bulk.requests:
                del self._bulks[bulk.id]
            self._update_ready(bulk)
        return request

    def clear_bulks(self) -> None:
        self._bulks.clear()
        self._ready.clear()

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
        for bulk in self._bulks.values():
            missing = sum(1 for r in bulk.requests if self._requests[r].slot is None)
            assert bulk.missing == missing, f"bulk {bulk.id}: missing {bulk.missing} != {missing}"
        assert self._ready == {b.id for b in self._bulks.values() if b.missing == 0}, "ready set"
