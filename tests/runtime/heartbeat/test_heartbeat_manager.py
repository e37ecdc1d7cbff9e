from __future__ import annotations

import asyncio

import pytest

from flintlock.runtime.clock import ManualClock
from flintlock.runtime.heartbeat.heartbeat_manager import (
    HeartbeatManager,
    HeartbeatMonitor,
    UnreachableTargets,
    rpc_failure_threshold,
)
from flintlock.runtime.ids import ResourceID
from flintlock.runtime.rpc.endpoint import RpcEndpoint
from flintlock.runtime.rpc.exceptions import RecipientUnreachable, RpcTimeout
from flintlock.testing.waiting import wait_until

TE1 = ResourceID("te-1")
TE2 = ResourceID("te-2")


# ---- pure core --------------------------------------------------------------------------------


def test_monitor_reports_only_targets_silent_for_the_timeout() -> None:
    monitor: HeartbeatMonitor[ResourceID] = HeartbeatMonitor(timeout_s=5.0)
    monitor.monitor(TE1, now=0.0)
    monitor.monitor(TE2, now=2.0)
    assert monitor.next_deadline() == 5.0
    assert monitor.report(TE1, now=4.0)
    assert monitor.expired(now=6.9) == []
    assert monitor.expired(now=7.0) == [TE2]
    assert TE2 not in monitor  # removed once reported
    assert monitor.expired(now=8.9) == []
    assert monitor.expired(now=9.0) == [TE1]
    assert monitor.next_deadline() is None


def test_heartbeat_from_unmonitored_target_is_ignored() -> None:
    monitor: HeartbeatMonitor[ResourceID] = HeartbeatMonitor(timeout_s=1.0)
    assert not monitor.report(TE1, now=0.0)
    monitor.monitor(TE1, now=0.0)
    assert monitor.unmonitor(TE1)
    assert monitor.expired(now=100.0) == []


def test_only_consecutive_unreachable_rpcs_mark_a_target_unreachable() -> None:
    targets: UnreachableTargets[ResourceID] = UnreachableTargets(threshold=2)
    gone = RecipientUnreachable("connection refused")
    assert not targets.rpc_done(TE1, gone)
    assert not targets.rpc_done(TE1, None)  # a success resets the count
    assert not targets.rpc_done(TE1, gone)
    assert not targets.rpc_done(TE1, RpcTimeout("slow"))  # a paused peer is not gone
    assert targets.rpc_done(TE1, gone)  # the second unreachable in a row
    assert not targets.rpc_done(TE1, gone)  # reported once
    assert not targets.rpc_done(TE2, gone)
    never: UnreachableTargets[ResourceID] = UnreachableTargets(threshold=None)
    assert not any(never.rpc_done(TE1, gone) for _ in range(10))


def test_rpc_failure_threshold_follows_flinks_option() -> None:
    from flintlock.config import Configuration
    from flintlock.config.configuration import IllegalConfigurationException

    assert rpc_failure_threshold(Configuration()) == 2
    assert rpc_failure_threshold(Configuration({"heartbeat.rpc-failure-threshold": "-1"})) is None
    with pytest.raises(IllegalConfigurationException, match="positive or -1"):
        rpc_failure_threshold(Configuration({"heartbeat.rpc-failure-threshold": "0"}))


def test_non_positive_timeout_is_rejected() -> None:
    with pytest.raises(ValueError, match="positive"):
        HeartbeatMonitor(timeout_s=0)


# ---- shell on a real endpoint with a ManualClock --------------------------------------------------


class _Endpoint(RpcEndpoint):
    def __init__(self, clock: ManualClock) -> None:
        super().__init__("hb-test", clock)
        self.timed_out: list[ResourceID] = []
        self.requests: list[ResourceID] = []

        self.unreachable: list[ResourceID] = []

    def notify_heartbeat_timeout(self, resource_id: ResourceID) -> None:
        self.timed_out.append(resource_id)

    def notify_target_unreachable(self, resource_id: ResourceID) -> None:
        self.unreachable.append(resource_id)


def _run(body) -> None:  # type: ignore[no-untyped-def]
    asyncio.run(asyncio.wait_for(body(), 10))


def test_receiver_times_out_a_silent_target_and_keeps_a_talking_one() -> None:
    async def body() -> None:
        clock = ManualClock()
        ep = _Endpoint(clock)
        await ep.start()
        hb: HeartbeatManager[ResourceID] = HeartbeatManager(ep, ep, interval_s=1.0, timeout_s=5.0)
        await ep.run_in_mailbox(hb.start)
        await ep.run_in_mailbox(hb.monitor_target, TE1)
        await ep.run_in_mailbox(hb.monitor_target, TE2)
        clock.advance(4.0)
        await ep.run_in_mailbox(hb.receive_heartbeat, TE1)
        clock.advance(1.5)  # TE2 silent for 5.5 s, TE1 for 1.5 s
        await wait_until(lambda: ep.timed_out == [TE2], describe=lambda: ep.timed_out)
        assert hb.targets() == [TE1]
        clock.advance(3.4)
        await ep.run_in_mailbox(lambda: None)  # drain the mailbox
        assert ep.timed_out == [TE2]
        clock.advance(0.2)
        await wait_until(lambda: ep.timed_out == [TE2, TE1], describe=lambda: ep.timed_out)
        await ep.stop()

    _run(body)


def test_sender_requests_heartbeats_every_interval_until_unmonitored() -> None:
    async def body() -> None:
        clock = ManualClock()
        ep = _Endpoint(clock)
        await ep.start()
        hb: HeartbeatManager[ResourceID] = HeartbeatManager(ep, ep, interval_s=1.0, timeout_s=50.0)

        async def request() -> None:
            ep.requests.append(TE1)

        await ep.run_in_mailbox(hb.start)
        await ep.run_in_mailbox(hb.monitor_target, TE1, request)
        for expected in (1, 2, 3):
            clock.advance(1.0)
            await wait_until(lambda n=expected: len(ep.requests) == n,
                             describe=lambda: ep.requests)
        await ep.run_in_mailbox(hb.unmonitor_target, TE1)
        clock.advance(5.0)
        await ep.run_in_mailbox(lambda: None)
        assert len(ep.requests) == 3
        assert ep.timed_out == []
        await ep.run_in_mailbox(hb.stop)
        assert clock.pending_timers() == 0
        await ep.stop()

    _run(body)


def test_sender_loses_a_target_its_requests_find_unreachable_before_the_timeout() -> None:
    async def body() -> None:
        clock = ManualClock()
        ep = _Endpoint(clock)
        await ep.start()
        hb: HeartbeatManager[ResourceID] = HeartbeatManager(
            ep, ep, interval_s=1.0, timeout_s=50.0, rpc_failure_threshold=2)

        async def refused() -> None:
            ep.requests.append(TE1)
            raise RecipientUnreachable("te-1: connection refused")

        await ep.run_in_mailbox(hb.start)
        await ep.run_in_mailbox(hb.monitor_target, TE1, refused)
        clock.advance(1.0)
        await wait_until(lambda: len(ep.requests) == 1, describe=lambda: ep.requests)
        await ep.run_in_mailbox(lambda: None)
        assert ep.unreachable == [] and hb.is_monitoring(TE1)
        clock.advance(1.0)
        await wait_until(lambda: ep.unreachable == [TE1], describe=lambda: ep.unreachable)
        assert not hb.is_monitoring(TE1) and ep.timed_out == []
        clock.advance(60.0)  # no more requests, no timeout for a target already lost
        await ep.run_in_mailbox(lambda: None)
        assert len(ep.requests) == 2 and ep.timed_out == []
        await ep.run_in_mailbox(hb.stop)
        await ep.stop()

    _run(body)


# ---- heartbeat.interval against heartbeat.timeout ---------------------------------------------


def test_interval_follows_a_configured_timeout_at_flinks_ratio() -> None:
    from flintlock.config import Configuration
    from flintlock.runtime.heartbeat.heartbeat_manager import heartbeat_settings

    assert heartbeat_settings(Configuration()) == (10.0, 50.0)  # Flink's defaults
    # the load issue's command line: only the timeout set; requests must come several times
    # per timeout, or a heartbeat that is a millisecond late loses a healthy TaskManager
    assert heartbeat_settings(Configuration({"heartbeat.timeout": "10000"})) == (2.0, 10.0)
    assert heartbeat_settings(Configuration({"heartbeat.timeout": "5 min"})) == (10.0, 300.0)
    assert heartbeat_settings(Configuration({"heartbeat.interval": "3 s",
                                             "heartbeat.timeout": "10 s"})) == (3.0, 10.0)


def test_an_interval_not_below_the_timeout_is_refused_with_the_fix() -> None:
    from flintlock.config import Configuration
    from flintlock.config.configuration import IllegalConfigurationException
    from flintlock.runtime.heartbeat.heartbeat_manager import heartbeat_settings

    conf = Configuration({"heartbeat.interval": "10 s", "heartbeat.timeout": "10 s"})
    with pytest.raises(IllegalConfigurationException,
                       match=r"heartbeat.interval \(10000 ms\) must be less than heartbeat.timeout "
                             r"\(10000 ms\).*at most 2000 ms"):
        heartbeat_settings(conf)
