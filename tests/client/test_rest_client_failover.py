"""``RestClusterClient`` follows the REST leader: a request that cannot connect is sent again to
whichever JobManager leads next, until ``client.timeout``; without high availability it fails
at once, naming the address."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from flintlock.client.rest_cluster_client import ClusterNotReachableException, RestClusterClient


def _transport(up: set[int], seen: list[tuple[str, int]]) -> httpx.MockTransport:
    """REST servers on the ports in ``up``; the others refuse connections."""

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.port or 0))
        if request.url.port not in up:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json={"taskmanagers": 1, "port": request.url.port})

    return httpx.MockTransport(handle)


def test_a_request_follows_the_next_leader() -> None:
    seen: list[tuple[str, int]] = []
    leaders: list[tuple[str, int] | None] = [None, ("127.0.0.1", 1000), ("127.0.0.1", 2000)]

    def leader() -> tuple[str, int] | None:  # the old one (stale), then the next one
        return leaders.pop(0) if len(leaders) > 1 else leaders[0]

    client = RestClusterClient("127.0.0.1", 1000, timeout_s=10,
                               transport=_transport({2000}, seen), leader=leader)
    body: Any = client._request("GET", "/overview")
    assert body["port"] == 2000 and client.base_url == "http://127.0.0.1:2000"
    assert [port for _, port in seen] == [1000, 1000, 1000, 2000]  # retried until it moved


def test_without_a_leader_to_follow_an_unreachable_cluster_fails_at_once() -> None:
    seen: list[tuple[str, int]] = []
    client = RestClusterClient("127.0.0.1", 1000, timeout_s=10, transport=_transport(set(), seen))
    with pytest.raises(ClusterNotReachableException, match="127.0.0.1:1000"):
        client._request("GET", "/overview")
    assert len(seen) == 1


def test_following_gives_up_after_the_client_timeout() -> None:
    seen: list[tuple[str, int]] = []
    client = RestClusterClient("127.0.0.1", 1000, timeout_s=0.5,
                               transport=_transport(set(), seen), leader=lambda: None)
    with pytest.raises(ClusterNotReachableException, match="No flintlock cluster is reachable"):
        client._request("GET", "/overview")
    assert 1 < len(seen) <= 4  # polled every 0.2 s for 0.5 s
