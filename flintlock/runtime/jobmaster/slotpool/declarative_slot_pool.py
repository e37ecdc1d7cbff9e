"""DeclarativeSlotPool: the slots a JobMaster owns and the requests waiting for one (pure).

Follows Flink ``DefaultDeclarativeSlotPool`` + ``DeclarativeSlotPoolBridge`` (fact sheet 8.3):
- A *slot request* (one per shared slot: all executions of one slot sharing group with the same
  subtask index scheduled together) names a ``ResourceProfile``: its group's resources, or
  ``UNKNOWN`` for a group without (fine-grained resources). It gets a free owned slot of that
  profile at once, or waits (FIFO per profile).
- A slot's profile is the one the ResourceManager requested it with (``SlotOffer.
  resource_profile``), so a request matches a slot when the two are equal: an UNKNOWN request
  never takes a slot sized for a group with resources, which the ResourceManager counts for that
  group.
- The JobMaster declares ``required_resources()`` = waiting requests + slots in use per profile
  to the ResourceManager; idle slots are not counted but stay in the pool until
  ``slot.idle.timeout``.
- Offers are accepted while requests of their profile wait for them (re-offers of an owned slot
  are accepted again).
- A request gets the free slot of the TaskManager with the lowest share of this job's slots in
  use (then the fewest in use): a job's subtasks spread evenly over the TaskManagers it holds
  slots on (Flink ``taskmanager.load-balance.mode: SLOTS``, ``EvenlySpreadOutLocationPreference
  SlotSelectionStrategy``; the ResourceManager spreads the slots themselves the same way).
- Blocked TaskManagers (speculative execution's slow nodes; Flink
  ``BlocklistDeclarativeSlotPool``): their new offers are refused, and their slots leave the
  pool as soon as they are free (``take_slots_to_free``), so no new request runs there.
No asyncio, no I/O; ``now`` (monotonic seconds) is passed in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.ids import AllocationID, ResourceID
from flintlock.runtime.taskexecutor.gateway import SlotOffer

__all__ = ["AllocatedSlot", "DeclarativeSlotPool", "SlotRequestId"]

SlotRequestId = int


@dataclass(eq=False)
class AllocatedSlot:
    """A slot of a TaskExecutor that was offered to and accepted by this JobMaster."""

    allocation_id: AllocationID
    resource_id: ResourceID
    task_executor_address: str
    slot_index: int
    #: the request using it, or None while idle
    request_id: SlotRequestId | None = None
    #: monotonic seconds since when it is idle
    idle_since: float | None = None
    #: the profile the ResourceManager requested it with (UNKNOWN: a default slot)
    resource_profile: ResourceProfile = ResourceProfile.UNKNOWN

    @property
    def is_free(self) -> bool:
        return self.request_id is None


class DeclarativeSlotPool:
    """Owned slots and pending slot requests of one job.

    Every operation is O(1) or O(slots it returns): free slots are kept in an insertion-ordered
    index (the slot free the longest first, so ``idle_since`` grows along it), slots in use by
    request id, so a job of thousands of subtasks schedules in linear time.
    """

    def __init__(self) -> None:
        self._slots: dict[AllocationID, AllocatedSlot] = {}
        #: free slots, in the order they became free (oldest ``idle_since`` first)
        self._free: dict[AllocationID, AllocatedSlot] = {}
        self._by_request: dict[SlotRequestId, AllocatedSlot] = {}
        #: waiting requests and their profiles, insertion-ordered (FIFO)
        self._pending: dict[SlotRequestId, ResourceProfile] = {}
        #: per profile: free slots (oldest idle first) and waiting requests (FIFO)
        self._free_of: dict[ResourceProfile, dict[AllocationID, AllocatedSlot]] = {}
        self._pending_of: dict[ResourceProfile, dict[SlotRequestId, None]] = {}
        #: per profile and TaskManager: its free slots (oldest idle first)
        self._free_on: dict[ResourceProfile, dict[ResourceID, dict[AllocationID, AllocatedSlot]]] = {}
        #: per TaskManager: slots owned, and slots in use
        self._owned_on: Counter[ResourceID] = Counter()
        self._in_use_on: Counter[ResourceID] = Counter()
        self._blocked: set[ResourceID] = set()
        #: slots of blocked TaskManagers that became free, to be returned to them
        self._to_free: list[AllocatedSlot] = []

    # ---- queries -------------------------------------------------------------------------------

    def slots(self) -> list[AllocatedSlot]:
        return list(self._slots.values())

    def slot(self, allocation_id: AllocationID) -> AllocatedSlot | None:
        return self._slots.get(allocation_id)

    def total_slots(self) -> int:
        return len(self._slots)

    def free_slots(self) -> list[AllocatedSlot]:
        return list(self._free.values())

    def slots_in_use(self) -> int:
        return len(self._by_request)

    def pending_requests(self) -> list[SlotRequestId]:
        return list(self._pending)

    def serves_all_pending(self) -> bool:
        """Whether the free slots can serve every waiting request (of every profile)."""
        return all(len(self._free_of.get(p, ())) >= len(w) for p, w in self._pending_of.items())

    def required_slots(self) -> int:
        """Waiting requests + slots in use (all profiles)."""
        return len(self._pending) + self.slots_in_use()

    def required_resources(self) -> tuple[tuple[ResourceProfile, int], ...]:
        """What to declare to the ResourceManager: waiting requests + slots in use, per profile
        (sorted, so equal requirements compare equal)."""
        counts = Counter(self._pending.values())
        counts.update(s.resource_profile for s in self._by_request.values())
        return tuple(sorted((p, n) for p, n in counts.items() if n))

    # ---- internal index maintenance --------------------------------------------------------------

    def _occupy(self, slot: AllocatedSlot, request_id: SlotRequestId) -> None:
        del self._free[slot.allocation_id]
        self._drop_free_of(slot)
        slot.request_id = request_id
        slot.idle_since = None
        self._by_request[request_id] = slot
        self._in_use_on[slot.resource_id] += 1

    def _make_free(self, slot: AllocatedSlot, now: float) -> None:
        if slot.request_id is not None:
            self._by_request.pop(slot.request_id, None)
            self._in_use_on[slot.resource_id] -= 1
        slot.request_id = None
        slot.idle_since = now
        self._free[slot.allocation_id] = slot
        self._free_of.setdefault(slot.resource_profile, {})[slot.allocation_id] = slot
        self._free_on.setdefault(slot.resource_profile, {}).setdefault(
            slot.resource_id, {})[slot.allocation_id] = slot

    def _drop_free_of(self, slot: AllocatedSlot) -> None:
        free = self._free_of.get(slot.resource_profile)
        if free is not None and free.pop(slot.allocation_id, None) is not None and not free:
            del self._free_of[slot.resource_profile]
        on = self._free_on.get(slot.resource_profile)
        mine = on.get(slot.resource_id) if on is not None else None
        if mine is not None and mine.pop(slot.allocation_id, None) is not None and not mine:
            del on[slot.resource_id]  # type: ignore[union-attr]
            if not on:
                del self._free_on[slot.resource_profile]

    def _pick(self, profile: ResourceProfile) -> AllocatedSlot | None:
        """The free slot of ``profile`` on the TaskManager with the lowest share of its slots in
        use, then the fewest in use (the first such TaskManager), its slot idle the longest."""
        on = self._free_on.get(profile)
        if not on:
            return None
        resource_id = min(on, key=lambda r: (self._in_use_on[r] / self._owned_on[r],
                                             self._in_use_on[r]))
        return next(iter(on[resource_id].values()))

    def _add_pending(self, request_id: SlotRequestId, profile: ResourceProfile) -> None:
        self._pending[request_id] = profile
        self._pending_of.setdefault(profile, {})[request_id] = None

    def _drop_pending(self, request_id: SlotRequestId) -> None:
        profile = self._pending.pop(request_id, None)
        if profile is not None:
            waiting = self._pending_of[profile]
            del waiting[request_id]
            if not waiting:
                del self._pending_of[profile]

    def _forget(self, slot: AllocatedSlot) -> None:
        del self._slots[slot.allocation_id]
        self._free.pop(slot.allocation_id, None)
        self._drop_free_of(slot)
        self._owned_on[slot.resource_id] -= 1
        if slot.request_id is not None:
            self._by_request.pop(slot.request_id, None)
            self._in_use_on[slot.resource_id] -= 1

    # ---- requests ------------------------------------------------------------------------------

    def request_slot(self, request_id: SlotRequestId,
                     profile: ResourceProfile = ResourceProfile.UNKNOWN) -> AllocatedSlot | None:
        """Assign a free slot of ``profile`` to ``request_id`` now (``_pick``), or queue the
        request."""
        slot = self._pick(profile)
        if slot is not None:
            self._occupy(slot, request_id)
            return slot
        self._add_pending(request_id, profile)
        return None

    def cancel_request(self, request_id: SlotRequestId) -> None:
        """Forget a waiting request (its executions were cancelled)."""
        self._drop_pending(request_id)

    def release_slot(self, request_id: SlotRequestId, now: float) -> AllocatedSlot | None:
        """The request's executions are done: its slot becomes idle (stays owned), or, on a
        blocked TaskManager, leaves the pool to be returned (``take_slots_to_free``)."""
        slot = self._by_request.get(request_id)
        if slot is not None:
            if slot.resource_id in self._blocked:
                self._forget(slot)
                self._to_free.append(slot)
            else:
                self._make_free(slot, now)
            return slot
        self._drop_pending(request_id)
        return None

    def assign_pending(self) -> list[tuple[SlotRequestId, AllocatedSlot]]:
        """Give free slots to waiting requests of their profile, oldest request first."""
        out: list[tuple[SlotRequestId, AllocatedSlot]] = []
        for profile in [p for p in self._pending_of if p in self._free_of]:
            while profile in self._pending_of and profile in self._free_of:
                request_id = next(iter(self._pending_of[profile]))
                self._drop_pending(request_id)
                slot = self._pick(profile)
                assert slot is not None
                self._occupy(slot, request_id)
                out.append((request_id, slot))
        out.sort(key=lambda pair: pair[0])
        return out

    # ---- slots ---------------------------------------------------------------------------------

    def offer_slots(
        self,
        resource_id: ResourceID,
        task_executor_address: str,
        offers: Iterable[SlotOffer],
        now: float,
    ) -> tuple[SlotOffer, ...]:
        """Accept the offers this job needs (owned ones again); returns the accepted offers.

        A new slot is accepted while requests of its profile wait for more than the free slots
        of that profile; accepted slots start idle, call ``assign_pending`` afterwards.
        """
        accepted: list[SlotOffer] = []
        for offer in offers:
            owned = self._slots.get(offer.allocation_id)
            if owned is not None:
                if owned.resource_id == resource_id:
                    accepted.append(offer)
                continue
            profile = offer.resource_profile
            if (len(self._pending_of.get(profile, ())) > len(self._free_of.get(profile, ()))
                    and resource_id not in self._blocked):
                slot = AllocatedSlot(offer.allocation_id, resource_id, task_executor_address,
                                     offer.slot_index, resource_profile=profile)
                self._slots[offer.allocation_id] = slot
                self._owned_on[resource_id] += 1
                self._make_free(slot, now)
                accepted.append(offer)
        return tuple(accepted)

    def block(self, resource_ids: Iterable[ResourceID]) -> None:
        """No new request runs on these TaskManagers until ``unblock``: their offers are
        refused, and their free slots (now, and as they become free) are to be returned."""
        self._blocked.update(resource_ids)
        for slot in [s for s in self._free.values() if s.resource_id in self._blocked]:
            self._forget(slot)
            self._to_free.append(slot)

    def unblock(self, resource_ids: Iterable[ResourceID]) -> None:
        self._blocked.difference_update(resource_ids)

    def blocked(self) -> frozenset[ResourceID]:
        return frozenset(self._blocked)

    def take_slots_to_free(self) -> list[AllocatedSlot]:
        """The slots blocked TaskManagers get back (each once)."""
        out, self._to_free = self._to_free, []
        return out

    def remove_slot(self, allocation_id: AllocationID) -> AllocatedSlot | None:
        """The slot is gone (freed by its TaskExecutor, failed, or returned by us)."""
        slot = self._slots.get(allocation_id)
        if slot is not None:
            self._forget(slot)
        return slot

    def remove_task_manager(self, resource_id: ResourceID) -> list[AllocatedSlot]:
        """All slots of a lost TaskExecutor; returns them (with the requests they served)."""
        lost = [s for s in self._slots.values() if s.resource_id == resource_id]
        for s in lost:
            self._forget(s)
        return lost

    def release_idle_slots(self, now: float, idle_timeout_s: float) -> list[AllocatedSlot]:
        """Remove and return the slots idle for at least ``idle_timeout_s``."""
        out = []
        for s in list(self._free.values()):
            assert s.idle_since is not None
            if now - s.idle_since < idle_timeout_s - 1e-9:
                break  # the free index is ordered by idle_since
            out.append(s)
        for s in out:
            self._forget(s)
        return out

    def next_idle_deadline(self, idle_timeout_s: float) -> float | None:
        """When the next idle slot times out (monotonic seconds), or None."""
        for s in self._free.values():
            assert s.idle_since is not None
            return s.idle_since + idle_timeout_s
        return None

    def release_all(self) -> list[AllocatedSlot]:
        """The job ended: forget every slot and request; returns the slots to free."""
        out = [*self._slots.values(), *self.take_slots_to_free()]
        self._slots.clear()
        self._free.clear()
        self._free_of.clear()
        self._by_request.clear()
        self._pending.clear()
        self._pending_of.clear()
        self._free_on.clear()
        self._owned_on.clear()
        self._in_use_on.clear()
        return out

    def validate(self, matching_deferred: bool = False) -> None:
        """Check the indexes; ``matching_deferred``: offered slots may wait for a batch
        (``slot.request.max-interval``), so free slots and waiting requests may coexist."""
        used = [s.request_id for s in self._slots.values() if s.request_id is not None]
        assert len(used) == len(set(used)), f"a request holds two slots: {used}"
        assert not set(used) & set(self._pending), "a request is both pending and assigned"
        for profile in () if matching_deferred else self._pending_of:
            assert profile not in self._free_of, f"a free {profile} slot while requests wait"
        assert {p: list(w) for p, w in self._pending_of.items()} == {
            p: [r for r, q in self._pending.items() if q == p] for p in set(self._pending.values())
        }, "pending index mismatch"
        assert {a for f in self._free_of.values() for a in f} == set(self._free), "free index"
        assert {a for on in self._free_on.values() for f in on.values() for a in f} == \
            set(self._free), "free index per TaskManager"
        assert +self._owned_on == Counter(s.resource_id for s in self._slots.values()), "owned"
        assert +self._in_use_on == Counter(
            s.resource_id for s in self._slots.values() if not s.is_free), "in use per TaskManager"
        assert not any(s.resource_id in self._blocked for s in self._free.values()), \
            "a free slot of a blocked TaskManager"
        for s in self._slots.values():
            assert (s.idle_since is None) != s.is_free, f"slot {s.allocation_id}: idle_since mismatch"
            assert (s.allocation_id in self._free) == s.is_free, f"slot {s.allocation_id}: free index"
        assert {r: s.allocation_id for r, s in self._by_request.items()} == {
            s.request_id: s.allocation_id for s in self._slots.values() if s.request_id is not None
        }, "request index mismatch"
        # free slots have an idle_since (checked above for the slots of the pool)
        idle = cast(list[float], [s.idle_since for s in self._free.values()])
        assert idle == sorted(idle), f"free index out of idle order: {idle}"
