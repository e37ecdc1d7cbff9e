"""Heartbeats between endpoints (Flink ``runtime/heartbeat/HeartbeatManager*``).

Two parts:

- ``HeartbeatMonitor``: the pure core. It remembers when each monitored target was last heard
  from and answers which targets are overdue at a given ``now`` (seconds of a ``Clock``). No
  timers, no asyncio.
- ``HeartbeatManager``: the shell owned by one ``RpcEndpoint``. On the *sender* side (the
  ResourceManager towards TaskExecutors and JobMasters; a JobMaster towards TaskExecutors) each
  target has a ``request`` callable that the manager calls every ``heartbeat.interval``; the target
  answers with a heartbeat the endpoint passes to ``receive_heartbeat``. On the *receiver* side
  (a TaskExecutor towards its ResourceManager and JobMasters) targets have no ``request`` and the
  endpoint calls ``receive_heartbeat`` whenever a heartbeat request arrives. Either way a target
  silent for ``heartbeat.timeout`` is dropped and ``HeartbeatListener.notify_heartbeat_timeout``
  runs in the endpoint's mailbox.

Payloads (a TaskExecutor's SlotReport) are handled by the endpoint itself, next to its
``receive_heartbeat`` call.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

from flintlock.config.configuration import Configuration, IllegalConfigurationException
from flintlock.config.options import (
    HEARTBEAT_INTERVAL,
    HEARTBEAT_RPC_FAILURE_THRESHOLD,
    HEARTBEAT_TIMEOUT,
)
from flintlock.runtime.clock import TimerHandle
from flintlock.runtime.rpc.endpoint import RpcEndpoint
from flintlock.runtime.rpc.exceptions import RecipientUnreachable

__all__ = [
    "HeartbeatListener",
    "HeartbeatManager",
    "HeartbeatMonitor",
    "UnreachableTargets",
    "heartbeat_settings",
    "rpc_failure_threshold",
]

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)


#: Flink's default ratio of ``heartbeat.timeout`` (50 s) to ``heartbeat.interval`` (10 s)
_TIMEOUT_TO_INTERVAL = 5.0


def heartbeat_settings(configuration: Configuration) -> tuple[float, float]:
    """``(interval_s, timeout_s)`` of the heartbeats, checked against each other.

    A target is lost when no heartbeat arrived for ``heartbeat.timeout``, and heartbeats are
    requested every ``heartbeat.interval``: with a timeout equal to the interval (Flink accepts
    that), every request that arrives a millisecond late loses a healthy peer. So:

    - ``heartbeat.interval`` unset: it is ``min(10 s, heartbeat.timeout / 5)``, Flink's default
      ratio, so ``-D heartbeat.timeout=10000`` alone means requests every 2 s.
    - set: it must be less than the timeout (a warning is logged when it is more than half).

    Raises:
        IllegalConfigurationException: ``heartbeat.interval`` >= ``heartbeat.timeout``.
    """
    timeout = configuration.get(HEARTBEAT_TIMEOUT)
    if not configuration.contains(HEARTBEAT_INTERVAL):
        return min(HEARTBEAT_INTERVAL.default, timeout / _TIMEOUT_TO_INTERVAL), timeout
    interval = configuration.get(HEARTBEAT_INTERVAL)
    if interval >= timeout:
        raise IllegalConfigurationException(
            f"heartbeat.interval ({interval * 1000:.0f} ms) must be less than heartbeat.timeout "
            f"({timeout * 1000:.0f} ms): a peer is declared lost when no heartbeat arrived "
            f"within the timeout, so requests must come several times per timeout. Set "
            f"heartbeat.interval to at most {timeout * 1000 / _TIMEOUT_TO_INTERVAL:.0f} ms "
            f"(Flink's 1:5 ratio) or leave it unset.")
    if interval > timeout / 2:
        log.warning("heartbeat.interval (%.0f ms) is more than half of heartbeat.timeout (%.0f ms): "
                    "one late heartbeat can lose a healthy peer", interval * 1000, timeout * 1000)
    return interval, timeout


def rpc_failure_threshold(configuration: Configuration) -> int | None:
    """``heartbeat.rpc-failure-threshold`` (Flink's ``HeartbeatManagerOptions``, default 2), or
    None when disabled (-1).

    Raises:
        IllegalConfigurationException: 0 or less than -1.
    """
    value = configuration.get(HEARTBEAT_RPC_FAILURE_THRESHOLD)
    if value == -1:
        return None
    if value < 1:
        raise IllegalConfigurationException(
            f"heartbeat.rpc-failure-threshold must be positive or -1 (disabled), got {value}")
    return int(value)


class UnreachableTargets(Generic[K]):
    """Pure count of consecutive heartbeat RPCs that found each target unreachable.

    After Flink's ``HeartbeatManagerSenderImpl``: only ``RecipientUnreachable`` (connection
    refused or reset: the process is gone) counts, not a timeout (a paused or busy peer); a
    successful RPC resets the count. A killed TaskManager is then lost after ``threshold``
    heartbeat intervals instead of ``heartbeat.timeout``.

    Args:
        threshold: failures that mark a target unreachable; None: never.
    """

    def __init__(self, threshold: int | None) -> None:
        self.threshold = threshold
        self._failures: dict[K, int] = {}

    def rpc_done(self, target: K, error: BaseException | None) -> bool:
        """Record one heartbeat RPC's outcome; True when ``target`` just became unreachable."""
        if not isinstance(error, RecipientUnreachable):
            if error is None:
                self._failures.pop(target, None)
            return False
        n = self._failures[target] = self._failures.get(target, 0) + 1
        return self.threshold is not None and n == self.threshold

    def forget(self, target: K) -> None:
        self._failures.pop(target, None)


class HeartbeatListener(Protocol[K_contra]):
    """Told (in the endpoint's mailbox) that a monitored target stopped sending heartbeats, or
    that heartbeat RPCs found it unreachable ``heartbeat.rpc-failure-threshold`` times in a row
    (Flink's ``HeartbeatListener.notifyHeartbeatTimeout`` / ``notifyTargetUnreachable``)."""

    def notify_heartbeat_timeout(self, resource_id: K_contra) -> None: ...

    def notify_target_unreachable(self, resource_id: K_contra) -> None: ...


class HeartbeatMonitor(Generic[K]):
    """Pure bookkeeping of the last heartbeat per target.

    Args:
        timeout_s: a target not heard from for this long is overdue.
    """

    def __init__(self, timeout_s: float) -> None:
        if timeout_s <= 0:
            raise ValueError(f"heartbeat timeout must be positive, got {timeout_s}")
        self.timeout_s = timeout_s
        #: target -> monotonic seconds of the last heartbeat (or of the start of monitoring)
        self._last: dict[K, float] = {}

    def monitor(self, target: K, now: float) -> None:
        """Start (or restart) monitoring ``target`` as if it had just sent a heartbeat."""
        self._last[target] = now

    def unmonitor(self, target: K) -> bool:
        return self._last.pop(target, None) is not None

    def report(self, target: K, now: float) -> bool:
        """Record a heartbeat; returns False (and ignores it) for an unmonitored target."""
        if target not in self._last:
            return False
        self._last[target] = max(self._last[target], now)
        return True

    def expired(self, now: float) -> list[K]:
        """Remove and return the targets whose last heartbeat is ``timeout_s`` or more ago."""
        overdue = [t for t, last in self._last.items() if now - last >= self.timeout_s]
        for target in overdue:
            del self._last[target]
        return overdue

    def next_deadline(self) -> float | None:
        """When the next target becomes overdue (None when nothing is monitored)."""
        if not self._last:
            return None
        return min(self._last.values()) + self.timeout_s

    def last_heartbeat(self, target: K) -> float | None:
        return self._last.get(target)

    def targets(self) -> list[K]:
        return list(self._last)

    def __contains__(self, target: object) -> bool:
        return target in self._last


class HeartbeatManager(Generic[K]):
    """Heartbeat requests and timeout monitoring for one endpoint.

    All methods must be called in the owning endpoint's mailbox; timers fire there too.

    Args:
        endpoint: the owning endpoint (its ``schedule``, ``run_async`` and clock are used).
        listener: told about timed-out targets.
        interval_s: how often targets with a ``request`` callable are asked for a heartbeat.
        timeout_s: silence after which a target is considered lost.
        name: for log lines (``"taskmanagers"``, ``"resourcemanager"``, ...).
        rpc_failure_threshold: consecutive unreachable heartbeat requests after which a target
            is lost before its timeout (None: never).
    """

    def __init__(
        self,
        endpoint: RpcEndpoint,
        listener: HeartbeatListener[K],
        interval_s: float,
        timeout_s: float,
        name: str = "heartbeat",
        rpc_failure_threshold: int | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"heartbeat interval must be positive, got {interval_s}")
        self._endpoint = endpoint
        self._listener = listener
        self.interval_s = interval_s
        self.name = name
        self._monitor: HeartbeatMonitor[K] = HeartbeatMonitor(timeout_s)
        self._requests: dict[K, Callable[[], Awaitable[Any]]] = {}
        self._tick_timer: TimerHandle | None = None
        self._timeout_timer: TimerHandle | None = None
        self._timeout_timer_due: float | None = None
        self._running = False
        self._unreachable: UnreachableTargets[K] = UnreachableTargets(rpc_failure_threshold)

    @classmethod
    def from_configuration(
        cls, endpoint: RpcEndpoint, listener: HeartbeatListener[K], configuration: Configuration,
        name: str = "heartbeat",
    ) -> HeartbeatManager[K]:
        interval_s, timeout_s = heartbeat_settings(configuration)
        return cls(endpoint, listener, interval_s, timeout_s, name,
                   rpc_failure_threshold(configuration))

    @property
    def timeout_s(self) -> float:
        return self._monitor.timeout_s

    # ---- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._running:
            return
        self._running = True
        self._schedule_tick()
        self._schedule_timeout_check()

    def stop(self) -> None:
        self._running = False
        for timer in (self._tick_timer, self._timeout_timer):
            if timer is not None:
                timer.cancel()
        self._tick_timer = self._timeout_timer = None
        self._timeout_timer_due = None

    # ---- targets -------------------------------------------------------------------------------

    def monitor_target(self, target: K, request: Callable[[], Awaitable[Any]] | None = None) -> None:
        """Monitor ``target``; ``request()`` (sender side) asks it for a heartbeat each interval."""
        self._monitor.monitor(target, self._endpoint.clock.monotonic())
        if request is not None:
            self._requests[target] = request
        else:
            self._requests.pop(target, None)
        self._schedule_timeout_check()

    def unmonitor_target(self, target: K) -> None:
        self._monitor.unmonitor(target)
        self._requests.pop(target, None)
        self._unreachable.forget(target)

    def receive_heartbeat(self, target: K) -> bool:
        """Record a heartbeat from ``target``; False if it is not monitored."""
        return self._monitor.report(target, self._endpoint.clock.monotonic())

    def is_monitoring(self, target: K) -> bool:
        return target in self._monitor

    def last_heartbeat(self, target: K) -> float | None:
        """Monotonic seconds (endpoint clock) of the last heartbeat from ``target``."""
        return self._monitor.last_heartbeat(target)

    def targets(self) -> list[K]:
        return self._monitor.targets()

    # ---- timers --------------------------------------------------------------------------------

    def _schedule_tick(self) -> None:
        if self._running:
            self._tick_timer = self._endpoint.schedule(self.interval_s, self._tick)

    def _tick(self) -> None:
        self._tick_timer = None
        if not self._running:
            return
        for target, request in list(self._requests.items()):
            try:
                awaitable = request()
            except Exception as exc:  # a broken target must not stop the others
                log.debug("%s: heartbeat request to %s failed: %s", self.name, target, exc)
                continue
            self._endpoint.run_async(awaitable, self._request_done(target))
        self._schedule_tick()

    def _request_done(self, target: K) -> Callable[[Any, BaseException | None], None]:
        def on_done(_: Any, error: BaseException | None) -> None:
            if error is not None:
                log.debug("%s: heartbeat request to %s failed: %s", self.name, target, error)
            if not self._unreachable.rpc_done(target, error) or target not in self._requests:
                return
            self.unmonitor_target(target)
            log.info("%s: %s is unreachable (%d heartbeat requests in a row failed: %s)",
                     self.name, target, self._unreachable.threshold, error)
            try:
                self._listener.notify_target_unreachable(target)
            except Exception:  # keep monitoring the others
                log.exception("%s: unreachable-target listener failed for %s", self.name, target)

        return on_done

    def _schedule_timeout_check(self) -> None:
        if not self._running:
            return
        due = self._monitor.next_deadline()
        if due is None:
            return
        if self._timeout_timer is not None and self._timeout_timer_due is not None \
                and self._timeout_timer_due <= due:
            return  # an earlier check is pending; it reschedules itself
        if self._timeout_timer is not None:
            self._timeout_timer.cancel()
        delay = max(0.0, due - self._endpoint.clock.monotonic())
        self._timeout_timer_due = due
        self._timeout_timer = self._endpoint.schedule(delay, self._check_timeouts)

    def _check_timeouts(self) -> None:
        self._timeout_timer = None
        self._timeout_timer_due = None
        if not self._running:
            return
        for target in self._monitor.expired(self._endpoint.clock.monotonic()):
            self._requests.pop(target, None)
            log.info("%s: the heartbeat of %s timed out after %.1f s", self.name, target,
                     self._monitor.timeout_s)
            try:
                self._listener.notify_heartbeat_timeout(target)
            except Exception:  # keep monitoring the others
                log.exception("%s: heartbeat timeout listener failed for %s", self.name, target)
        self._schedule_timeout_check()
