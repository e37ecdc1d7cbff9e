"""``PollingJobClient.get_job_result``: blocking result queries instead of sleeping polls."""

from __future__ import annotations

import time

import pytest

from flintlock.client.job_client import PollingJobClient
from flintlock.runtime.executiongraph.archived import JobResult
from flintlock.runtime.ids import JobID


class _Client(PollingJobClient):
    """Answers the result on call number ``ready_at`` (never when None); a call that has no
    answer blocks for its ``wait_s``, as the Dispatcher's blocking query does."""

    def __init__(self, ready_at: int | None) -> None:
        super().__init__(JobID.generate(), "job", show_progress=False)
        self.ready_at = ready_at
        self.waits: list[float] = []

    def _result(self, wait_s: float = 0.0) -> JobResult | None:
        self.waits.append(wait_s)
        if self.ready_at is not None and len(self.waits) >= self.ready_at:
            return JobResult(self._job_id, "job", "SUCCEEDED", 5)
        time.sleep(wait_s)  # the server holds the request for the wait
        return None

    def get_job_details(self):  # type: ignore[no-untyped-def]
        raise RuntimeError("no snapshot here")  # the failure report is best effort


def test_the_client_asks_at_once_then_waits_on_the_server_without_sleeping_itself() -> None:
    client = _Client(ready_at=3)
    result = client.get_job_result()
    assert result.application_status == "SUCCEEDED"
    assert client.waits[0] == 0.0  # a job that already ended answers at once
    assert all(0.005 <= w <= 0.5 for w in client.waits[1:]), client.waits
    assert len(client.waits) == 3


def test_the_wait_ends_at_the_callers_deadline() -> None:
    client = _Client(ready_at=None)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="not finished after 0.2 s"):
        client.get_job_result(timeout_s=0.2)
    took = time.monotonic() - started
    assert 0.2 <= took < 2.0, (took, client.waits)
    assert max(client.waits) <= 0.2, client.waits  # no request outlives the deadline
