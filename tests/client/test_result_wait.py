"""``PollingJobClient.get_job_result``: blocking result queries instead of sleeping polls."""

from __future__ import annotations

import pytest

from flintlock.client import job_client
from flintlock.client.job_client import PollingJobClient
from flintlock.runtime.executiongraph.archived import JobResult
from flintlock.runtime.ids import JobID


class _Clock:
    """The client's monotonic clock; a request without an answer advances it by its wait."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class _Client(PollingJobClient):
    """Answers the result on call number ``ready_at`` (never when None); a call that has no
    answer takes its ``wait_s``, as the Dispatcher's blocking query does."""

    def __init__(self, clock: _Clock, ready_at: int | None) -> None:
        super().__init__(JobID.generate(), "job", show_progress=False)
        self.clock = clock
        self.ready_at = ready_at
        self.waits: list[float] = []

    def _result(self, wait_s: float = 0.0) -> JobResult | None:
        self.waits.append(wait_s)
        if self.ready_at is not None and len(self.waits) >= self.ready_at:
            return JobResult(self._job_id, "job", "SUCCEEDED", 5)
        self.clock.now += wait_s  # the server holds the request for the wait
        return None

    def get_job_details(self):  # type: ignore[no-untyped-def]
        raise RuntimeError("no snapshot here")  # the failure report is best effort


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(job_client.time, "monotonic", fake.monotonic)
    return fake


def test_the_client_asks_at_once_then_waits_on_the_server_without_sleeping_itself(
        clock: _Clock) -> None:
    client = _Client(clock, ready_at=3)
    result = client.get_job_result()
    assert result.application_status == "SUCCEEDED"
    assert client.waits[0] == 0.0  # a job that already ended answers at once
    assert all(0.005 <= w <= 0.5 for w in client.waits[1:]), client.waits
    assert len(client.waits) == 3


def test_the_wait_ends_at_the_callers_deadline(clock: _Clock) -> None:
    client = _Client(clock, ready_at=None)
    started = clock.monotonic()
    with pytest.raises(TimeoutError, match="not finished after 0.2 s"):
        client.get_job_result(timeout_s=0.2)
    took = clock.monotonic() - started
    assert 0.2 <= took < 2.0, (took, client.waits)
    assert max(client.waits) <= 0.2, client.waits  # no request outlives the deadline
