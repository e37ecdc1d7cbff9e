"""Recording stand-ins for the parties of a leader election (tests of election and retrieval
services): ``RecordingContender`` keeps ``"granted <session>"``, ``"revoked"`` and
``"error <why>"`` events; ``RecordingListener`` keeps every leader it was told of."""

from __future__ import annotations

from flintlock.runtime.highavailability.leader import LeaderInformation

__all__ = ["RecordingContender", "RecordingListener"]


class RecordingContender:
    def __init__(self) -> None:
        self.events: list[str] = []

    def grant_leadership(self, session_id: str) -> None:
        self.events.append(f"granted {session_id}")

    def revoke_leadership(self) -> None:
        self.events.append("revoked")

    def handle_error(self, error: BaseException) -> None:
        self.events.append(f"error {error}")

    @property
    def session(self) -> str:
        """The session of the first grant."""
        return self.events[0].split()[1]


class RecordingListener:
    def __init__(self) -> None:
        self.seen: list[LeaderInformation | None] = []

    def notify_leader_address(self, leader: LeaderInformation | None) -> None:
        self.seen.append(leader)

    def handle_error(self, error: BaseException) -> None:
        raise AssertionError(error)
