"""Matching a savepoint to a changed program by OperatorID (``map_to_job``), and the Dispatcher's
savepoint operations (trigger id -> outcome)."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass

import pytest

from flintlock.runtime.checkpoint.savepoint_restore import CheckpointRestoreException, map_to_job
from flintlock.runtime.checkpoint.snapshots import (
    CompletedCheckpoint,
    OperatorStateHandle,
    TaskStateSnapshot,
)
from flintlock.runtime.dispatcher.savepoint_operations import (
    SavepointOperations,
    UnknownOperationException,
)
from flintlock.runtime.ids import JobID


@dataclass
class _Vertex:
    id: str
    name: str
    parallelism: int
    operator_ids: tuple[str, ...]
    operator_names: tuple[str, ...] = ()
    operator_state_kinds: tuple[str, ...] = ()


@dataclass
class _JobGraph:
    vertices: list[_Vertex]


def _savepoint() -> CompletedCheckpoint:
    """Saved: vertex "src" = [source S, assigner A] at p1; vertex "win" = [window W, sink K] at p2."""
    source = TaskStateSnapshot({"position": 100}, (
        OperatorStateHandle(1, "A", "", 0, "", 5, None, None, 990),), source_operator="S")
    windows = {f"win/{i}": TaskStateSnapshot(None, (
        OperatorStateHandle(0, "W", f"/sp/win/{i}/0", 7, "k string", 900, 1999),)) for i in (0, 1)}
    return CompletedCheckpoint("old", 4, 1, 2, "/sp", {"src/0": source, **windows}, savepoint=True)


def test_state_follows_its_operator_into_a_differently_chained_program() -> None:
    # a map M was added after the source, and the window now heads a new vertex id
    job = _JobGraph([_Vertex("src2", "Source -> Map -> Timestamps", 1, ("S", "M", "A")),
                     _Vertex("win2", "Window -> Sink", 2, ("W", "K"))])
    mapped = map_to_job(_savepoint(), job)
    src = mapped.task_state("src2", 0)
    assert src is not None and src.source_offset == {"position": 100}
    assert [(h.operator_id, h.node) for h in src.operators] == [("A", 2)]
    win = mapped.task_state("win2", 1)
    assert win is not None and win.operators[0].state_dir == "/sp/win/1/0"
    assert mapped.savepoint and mapped.checkpoint_id == 4


def test_state_of_an_operator_the_program_lost_is_refused_unless_allowed() -> None:
    job = _JobGraph([_Vertex("src", "Source", 1, ("S", "A")),
                     _Vertex("other", "Other window", 2, ("X", "K"))])
    with pytest.raises(CheckpointRestoreException, match="Cannot map .* W .*uid") as info:
        map_to_job(_savepoint(), job)
    assert "--allow-non-restored-state" in str(info.value)
    mapped = map_to_job(_savepoint(), job, allow_non_restored=True)
    assert mapped.task_state("other", 0) is None
    assert mapped.task_state("src", 0) is not None


def test_a_changed_parallelism_of_a_stateful_operator_is_refused() -> None:
    job = _JobGraph([_Vertex("src", "Source", 1, ("S", "A")),
                     _Vertex("win", "Window", 3, ("W", "K"))])
    with pytest.raises(CheckpointRestoreException, match="parallelism 2, the program runs it at 3"):
        map_to_job(_savepoint(), job)


def _with_kinds(checkpoint: CompletedCheckpoint) -> CompletedCheckpoint:
    """``_savepoint()`` as written once state kinds were recorded: A watermarks, W a window."""
    kinds = {"A": "watermarks", "W": "window"}
    return dataclasses.replace(checkpoint, tasks={
        key: dataclasses.replace(t, operators=tuple(
            dataclasses.replace(h, kind=kinds[h.operator_id]) for h in t.operators))
        for key, t in checkpoint.tasks.items()})


def test_state_of_another_kind_under_the_same_uid_is_refused_even_when_allowed() -> None:
    job = _JobGraph([_Vertex("src", "Source", 1, ("S", "A"), ("Source", "Timestamps"),
                             ("", "watermarks")),
                     _Vertex("win", "Process -> Sink", 2, ("W", "K"), ("Process", "Sink"),
                             ("keyed-process", ""))])
    for allowed in (False, True):
        with pytest.raises(CheckpointRestoreException) as info:
            map_to_job(_with_kinds(_savepoint()), job, allow_non_restored=allowed)
        text = str(info.value)
        assert ("W ('Process')" in text and "written by a window operator" in text
                and "is a KeyedProcessFunction" in text and "new uid()" in text), text


def test_state_kinds_that_match_or_were_not_recorded_restore() -> None:
    same = _JobGraph([_Vertex("src", "Source", 1, ("S", "A"), ("Source", "Timestamps"),
                              ("", "watermarks")),
                      _Vertex("win", "Window -> Sink", 2, ("W", "K"), ("Window", "Sink"),
                              ("window", ""))])
    assert map_to_job(_with_kinds(_savepoint()), same).task_state("win", 0) is not None
    changed = dataclasses.replace(same, vertices=[same.vertices[0], dataclasses.replace(
        same.vertices[1], operator_state_kinds=("keyed-process", ""))])
    # a savepoint from before kinds were recorded: nothing to compare, the restore goes ahead
    assert map_to_job(_savepoint(), changed).task_state("win", 1) is not None


def test_a_finished_subtask_stays_finished_when_its_vertex_remains() -> None:
    saved = CompletedCheckpoint("old", 1, 1, 2, "/sp", {"src/0": TaskStateSnapshot(finished=True)})
    mapped = map_to_job(saved, _JobGraph([_Vertex("src", "Source", 1, ("S",))]))
    assert mapped.task_state("src", 0) == TaskStateSnapshot(finished=True)


def test_savepoint_operations_report_progress_then_the_outcome() -> None:
    ops = SavepointOperations()
    job = JobID.generate()
    op = ops.start(job)
    assert ops.get(job, op.trigger_id).to_json() == {"status": {"id": "IN_PROGRESS"},
                                                     "operation": None}
    with pytest.raises(UnknownOperationException):
        ops.get(JobID.generate(), op.trigger_id)
    answers = iter([("IN_PROGRESS", ""), ("COMPLETED", "")])

    async def status() -> tuple[str, str]:
        return next(answers)

    async def written() -> bool:
        raise AssertionError("not asked while the JobMaster answers")

    op.location = "/sp/savepoint-1"
    asyncio.run(SavepointOperations.follow(op, status, written, deadline_s=10))
    assert op.to_json() == {"status": {"id": "COMPLETED"},
                            "operation": {"location": "/sp/savepoint-1"}}


def test_a_savepoint_whose_job_ended_counts_as_completed_only_if_it_was_written() -> None:
    for was_written, expected in ((True, "COMPLETED"), (False, "FAILED")):
        op = SavepointOperations().start(JobID.generate())

        async def gone() -> tuple[str, str]:
            raise ConnectionError("JobMaster stopped")

        async def written(answer: bool = was_written) -> bool:
            return answer

        asyncio.run(SavepointOperations.follow(op, gone, written, deadline_s=10))
        assert op.status == expected
        if expected == "FAILED":
            assert "ended before the savepoint completed" in op.failure
