"""Leader information and the parties of a leader election (Flink ``LeaderInformation``,
``LeaderContender``, ``LeaderRetrievalListener``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from flintlock.exceptions import FlintlockException

__all__ = ["LeaderContender", "LeaderInformation", "LeaderRetrievalListener",
           "LeadershipCheck", "LeadershipLostException", "new_session_id"]


class LeadershipLostException(FlintlockException):
    """This JobManager no longer leads: what it was about to write (a sink commit, a
    checkpoint's metadata, a job result) belongs to the newer leader, so it is not written."""


#: raises ``LeadershipLostException`` unless the caller's leadership is still held, confirmed
#: with the HA store (Flink checks the leader latch in ZooKeeper before such writes)
LeadershipCheck = Callable[[], None]


def new_session_id() -> str:
    """A fresh leader session id (Flink's ``UUID``), also the leader's fencing token."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class LeaderInformation:
    """Who leads: the leader session id and the addresses its components serve at.

    Attributes:
        session_id: the leadership's id (hex UUID); a new one for every granted leadership.
        addresses: component -> address, e.g. ``{"dispatcher": "grpc://h:p/dispatcher",
            "resourcemanager": "grpc://h:p/resourcemanager", "rest": "http://h:8081"}``.
    """

    session_id: str
    addresses: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"session_id": self.session_id, "addresses": dict(self.addresses)})

    def rest_endpoint(self) -> tuple[str, int] | None:
        """(host, port) of the leader's REST server (None when its address is not a URL)."""
        url = urlsplit(self.addresses.get("rest", ""))
        return (url.hostname, url.port) if url.hostname and url.port else None

    @classmethod
    def from_json(cls, text: str) -> LeaderInformation:
        """Raises: ValueError: not a leader information document."""
        try:
            doc: Any = json.loads(text)
            session, addresses = doc["session_id"], doc["addresses"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a leader information document: {text[:200]!r}") from exc
        if not isinstance(session, str) or not isinstance(addresses, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in addresses.items()):
            raise ValueError(f"not a leader information document: {text[:200]!r}")
        return cls(session, dict(addresses))


class LeaderContender(Protocol):
    """Takes part in an election. Callbacks come from the election service's thread."""

    def grant_leadership(self, session_id: str) -> None:
        """This contender leads under ``session_id``; it answers with ``confirm_leadership``
        once its components serve."""

    def revoke_leadership(self) -> None:
        """It no longer leads (its session was lost): stop acting as the leader at once."""

    def handle_error(self, error: BaseException) -> None:
        """The election itself failed (e.g. the storage is gone)."""


class LeaderRetrievalListener(Protocol):
    """Learns who leads. Callbacks come from the retrieval service's thread."""

    def notify_leader_address(self, leader: LeaderInformation | None) -> None:
        """A new leader (None: none is known any more)."""

    def handle_error(self, error: BaseException) -> None:
        """Retrieval failed."""
