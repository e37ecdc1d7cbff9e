"""``execute_and_collect()`` of a STREAMING job: rows as they are produced (Flink's
``CollectResultIterator``, a ``CloseableIterator``).

The iterator asks the job's collect coordinator (``JobClient.send_coordination_request``: the
MiniCluster's Dispatcher, or ``POST /jobs/:jobid/coordinators/:operatorid`` on a session
cluster) for the batches after those it has, with ``{"offset": n}``; an empty answer while the job
runs is asked again after a back-off of 5 ms growing to 100 ms. It ends when the coordinator says
``end`` (the job FINISHED and every row was handed out). Closing it (``close()``, leaving a
``with`` block, reaching ``limit``) cancels the job if it still runs, as Flink's does.

Raises from ``next()``: ``JobExecutionException`` when the job failed or was cancelled by
someone else; ``CollectException`` when the job restarted after rows were returned (without
checkpoints they would come again).
"""

from __future__ import annotations

import collections
import time
from typing import Any

import pyarrow as pa

from flintlock.exceptions import FlintlockException

__all__ = ["CollectException", "CollectResultIterator", "collected_payloads"]

_MIN_POLL_S, _MAX_POLL_S = 0.005, 0.1
_ENDED = ("FINISHED", "FAILED", "CANCELED", "SUSPENDED")


class CollectException(FlintlockException):
    """The collected results cannot go on (the message says why and what to do)."""


class CollectResultIterator:
    """Args: ``job_client`` (with ``send_coordination_request``), ``operator_id`` (the collect
    sink's uid), ``limit`` (stop, and cancel the job, after this many rows; None: all)."""

    def __init__(self, job_client: Any, operator_id: str, limit: int | None = None) -> None:
        self.job_client = job_client
        self._operator_id = operator_id
        self._limit = limit
        self._rows: collections.deque[Any] = collections.deque()
        self._offset = 0
        self._returned = 0
        self._ended = False  # everything was received
        self._closed = False
        self._poll_s = _MIN_POLL_S

    @property
    def job_id(self) -> Any:
        return self.job_client.job_id

    def __iter__(self) -> CollectResultIterator:
        return self

    def __next__(self) -> Any:
        if self._closed or self._limit_reached():
            self.close()
            raise StopIteration
        while not self._rows:
            if self._ended:
                self.close()
                raise StopIteration
            self._fetch()
        self._returned += 1
        return self._rows.popleft()

    def _limit_reached(self) -> bool:
        return self._limit is not None and self._returned >= self._limit

    def _fetch(self) -> None:
        from flintlock.api.schema import table_to_rows
        from flintlock.runtime.dispatcher.collect_coordinator import CollectResponse

        body = self.job_client.send_coordination_request(self._operator_id,
                                                         {"offset": self._offset})
        response = CollectResponse.from_json(body)
        fresh = response.batches[self._offset - response.offset:]
        self._offset = response.offset + len(response.batches)
        for batch in fresh:
            self._rows.extend(table_to_rows(pa.ipc.open_file(pa.BufferReader(batch)).read_all()))
        if response.failure:
            self.close()
            raise CollectException(f"job {self.job_id}: {response.failure}")
        if response.end:
            self._ended = True
            if fresh:  # tell the coordinator everything arrived, so it lets the results go
                self.job_client.send_coordination_request(self._operator_id,
                                                          {"offset": self._offset})
            return
        status = str(body.get("jobStatus", ""))
        if status in _ENDED and status != "FINISHED":
            self._closed = True
            self.job_client.get_job_execution_result()  # raises JobExecutionException
            raise CollectException(f"job {self.job_id} ended {status}")
        if fresh:
            self._poll_s = _MIN_POLL_S
        else:
            time.sleep(self._poll_s)
            self._poll_s = min(self._poll_s * 2, _MAX_POLL_S)

    def close(self) -> None:
        """Stop reading; cancel the job if it is still running. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._ended:
            return
        try:
            status = self.job_client.get_job_status()
            status = status.result() if hasattr(status, "result") else status
            if getattr(status, "name", str(status)) not in _ENDED:
                self.job_client.cancel()
        except Exception as exc:  # the job may be gone already
            raise CollectException(f"closing the collect iterator of job {self.job_id}: "
                                   f"cancelling the job failed: {exc}") from exc

    def __enter__(self) -> CollectResultIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def collected_payloads(accumulators: Any, uid: str) -> list[bytes]:
    """BATCH: the Arrow IPC payloads of collect sink ``uid`` in a finished job's accumulators
    (``collect-<uid>/<subtask>``), by subtask."""
    prefix = f"collect-{uid}/"
    found = [(int(k[len(prefix):]), v) for k, v in dict(accumulators).items()
             if isinstance(k, str) and k.startswith(prefix) and v]
    return [bytes(v) for _, v in sorted(found)]
