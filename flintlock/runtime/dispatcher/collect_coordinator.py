"""The JobManager's side of ``execute_and_collect`` on a STREAMING job (Flink's
``CollectSinkOperatorCoordinator``, with the offset protocol of its ``CollectResultFetcher``).

Each collect sink subtask attempt writes its rows epoch by epoch as a PIPELINED partition with one
subpartition and one consumer, this coordinator (``pipelined.collect_partition_uri``:
``<root>/<job>/collect/<sink uid>/<subtask>/<attempt>``, Arrow IPC segments). The client asks
with the number of batches it has received so far (``offset``); the coordinator drops what the
client has, reads newly committed segments while it holds less than ``max_bytes`` (Flink's
``collect-sink.batch-size.max``, 2 MiB), acknowledges them to the sink subtasks (their credits,
so a client that stops reading back-pressures the job) and answers with the batches from
``offset`` on.

A sink subtask's newest attempt is read. When a restarted attempt replaces one whose rows were
already handed out, the answer says so (``failure``): without checkpoints the new attempt
produces them again (Flink's uncheckpointed collect buffer fails the same way). ``end`` is true
once the job FINISHED and every subtask's partition ended and was handed out. Blocking file I/O:
call ``fetch`` off the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from flintlock.runtime.shuffle.layout import filesystem_and_path
from flintlock.runtime.shuffle.pipelined import PipelinedPartitionReader

__all__ = ["CollectCoordinator", "CollectResponse", "MAX_RESPONSE_BYTES"]

#: bytes of rows the coordinator holds for the client at most (Flink's collect-sink.batch-size.max)
MAX_RESPONSE_BYTES = 2 * 2**20


@dataclass(frozen=True)
class CollectResponse:
    """What one request gets.

    Attributes:
        offset: the index of ``batches[0]`` in the sequence of all batches of this sink.
        batches: Arrow IPC files, each one epoch of one subtask, in the order read.
        end: no batch follows (the job FINISHED and everything was handed out).
        failure: why the results cannot go on (a restart after rows were handed out), or "".
    """

    offset: int
    batches: tuple[bytes, ...] = ()
    end: bool = False
    failure: str = ""

    def to_json(self) -> dict[str, Any]:
        import base64

        return {"offset": self.offset, "end": self.end, "failure": self.failure,
                "batches": [base64.b64encode(b).decode() for b in self.batches]}

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> CollectResponse:
        import base64

        return cls(int(body["offset"]), tuple(base64.b64decode(b) for b in body.get("batches", ())),
                   bool(body.get("end")), str(body.get("failure") or ""))


@dataclass
class _Subtask:
    attempt: int
    reader: PipelinedPartitionReader
    handed_out: bool = False


@dataclass
class CollectCoordinator:
    """Args: ``uri``: the sink's directory (``<collect root>/<sink uid>``)."""

    uri: str
    max_bytes: int = MAX_RESPONSE_BYTES
    _base: int = 0
    _pending: list[bytes] = field(default_factory=list)
    _subtasks: dict[int, _Subtask] = field(default_factory=dict)
    _failure: str = ""

    def fetch(self, offset: int, job_finished: bool) -> CollectResponse:
        """The batches from ``offset`` on (see the module docstring).

        Raises:
            ValueError: ``offset`` is before what the client already acknowledged or after what
                it was given.
        """
        if offset < self._base or offset > self._base + len(self._pending):
            raise ValueError(f"collect offset {offset} is outside the batches handed out "
                             f"({self._base}..{self._base + len(self._pending)})")
        del self._pending[:offset - self._base]
        self._base = offset
        if not self._failure:
            self._discover()
        if not self._failure:
            self._read()
        end = (job_finished and not self._failure and bool(self._subtasks)
               and all(s.reader.ended for s in self._subtasks.values()))
        return CollectResponse(self._base, tuple(self._pending), end, self._failure)

    def _discover(self) -> None:
        fs, path = filesystem_and_path(self.uri)
        for subtask, attempts in _attempt_dirs(fs, path).items():
            newest = max(attempts)
            known = self._subtasks.get(subtask)
            if known is not None and known.attempt >= newest:
                continue
            if known is not None and known.handed_out:
                self._failure = (
                    f"collect sink subtask {subtask} restarted (attempt {newest}) after its rows "
                    "were returned; without checkpoints the restarted job produces them again, so "
                    "the collect iterator cannot go on. Run the job without failures, or read "
                    "its output from a sink instead")
                return
            reader = PipelinedPartitionReader([f"{self.uri}/{subtask}/{newest}"], 0, 0, 0)
            self._subtasks[subtask] = _Subtask(newest, reader)

    def _read(self) -> None:
        held = sum(len(b) for b in self._pending)
        progress = True
        while held < self.max_bytes and progress:
            progress = False
            for s in self._subtasks.values():
                for segment in s.reader.poll(1):
                    progress = True
                    for path in segment.dirs:
                        fs, p = filesystem_and_path(path)
                        with fs.open_input_stream(p) as fh:
                            data = bytes(fh.read())
                        self._pending.append(data)
                        held += len(data)
                        s.handed_out = True
                s.reader.acknowledge()

    def release(self) -> None:
        """Delete the sink's partitions (the client is done, or nobody fetched in time)."""
        fs, path = filesystem_and_path(self.uri)
        try:
            fs.delete_dir(path)
        except (FileNotFoundError, OSError):
            pass


def _attempt_dirs(fs: pafs.FileSystem, path: str) -> dict[int, list[int]]:
    """Attempt numbers per subtask under ``path`` (``<subtask>/<attempt>``)."""
    out: dict[int, list[int]] = {}
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=False))
    except (FileNotFoundError, OSError):
        return out
    for info in infos:
        if info.type != pafs.FileType.Directory or not info.base_name.isdigit():
            continue
        subs = fs.get_file_info(pafs.FileSelector(info.path, allow_not_found=True))
        attempts = [int(a.base_name) for a in subs
                    if a.type == pafs.FileType.Directory and a.base_name.isdigit()]
        if attempts:
            out[int(info.base_name)] = attempts
    return out
