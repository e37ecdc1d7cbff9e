"""Match a savepoint's state to a (possibly changed) program (Flink ``Checkpoints.loadAndValidateCheckpoint``).

A savepoint names each subtask's state by ``"<job vertex id>/<subtask>"``, and within it every
operator's state by its OperatorID (a ``uid()``'s hash, else random per compilation) and a
source's offset by the source's OperatorID. ``map_to_job`` rebuilds the per-subtask state for
``job_graph``'s vertices by OperatorID, so chains may be formed differently (a stateless
operator added or removed) as long as the stateful operators and sources keep their uids and
parallelism:

- an operator's state goes to the vertex whose chain holds that OperatorID, at its index there;
- a source offset goes to the vertex whose head is that source;
- state the program has no operator for is an error naming the operator, unless
  ``allow_non_restored`` (``execution.savepoint.ignore-unclaimed-state``; Flink's
  ``--allowNonRestoredState``), which drops it;
- a stateful operator whose parallelism changed is an error (rescaling state between key-group
  ranges is not supported yet);
- state restored into an operator of another kind under the same uid (a window's rows into a
  ``KeyedProcessFunction``, say) is an error naming both kinds, whatever ``allow_non_restored``
  says (Flink fails such a restore when the operator registers its state with an incompatible
  type). Schema changes within a kind (other key or input columns) are found by the task when
  it first sees its input (``TimedOperators``), changed state descriptors by the user
  function's worker (``keyed_process``).

Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from flintlock.exceptions import FlintlockException
from flintlock.runtime.checkpoint.snapshots import (
    CompletedCheckpoint,
    OperatorStateHandle,
    TaskStateSnapshot,
    subtask_key,
)

__all__ = ["CHANGED_STATE_ADVICE", "CheckpointRestoreException", "map_to_job"]

#: what to do about state that changed under the same uid (``map_to_job``, ``TimedOperators``)
CHANGED_STATE_ADVICE = (
    "Restore with the program that took the savepoint, or give the changed operator a new "
    "uid(): it then starts with empty state, and --allow-non-restored-state drops the old one.")


class CheckpointRestoreException(FlintlockException):
    """A savepoint or checkpoint cannot be restored into this program (the message says why
    and what to do)."""

    non_recoverable = True


def _holds_state(handle: OperatorStateHandle) -> bool:
    return bool(handle.state_dir) or handle.max_timestamp is not None


_KIND_NAMES = {"window": "a window operator", "keyed-process": "a KeyedProcessFunction",
               "watermarks": "a watermark assigner", "": "a stateless operator"}


def _check_kind(checkpoint: CompletedCheckpoint, handle: OperatorStateHandle, vertex: Any,
                index: int) -> None:
    kinds = getattr(vertex, "operator_state_kinds", ())
    if not handle.kind or not _holds_state(handle) or index >= len(kinds):
        return  # recorded before kinds were, or nothing to restore, or not known
    if kinds[index] == handle.kind:
        return
    name = vertex.operator_names[index] if index < len(vertex.operator_names) else vertex.name
    raise CheckpointRestoreException(
        f"cannot restore operator {handle.operator_id} ({name!r}) from "
        f"{checkpoint.external_pointer}: its state was written by "
        f"{_KIND_NAMES.get(handle.kind, handle.kind)}, but the new program's operator with that "
        f"uid is {_KIND_NAMES.get(kinds[index], kinds[index])} (the state changed under the same "
        f"uid). {CHANGED_STATE_ADVICE}")


def map_to_job(checkpoint: CompletedCheckpoint, job_graph: Any,
               allow_non_restored: bool = False) -> CompletedCheckpoint:
    """``checkpoint``'s state keyed by ``job_graph``'s subtasks (see the module docstring).

    Raises:
        CheckpointRestoreException: unclaimed state (without ``allow_non_restored``), a changed
            parallelism or a changed state kind, naming the operator.
    """
    place: dict[str, tuple[Any, int]] = {}  # operator id -> (vertex, index in its chain)
    for vertex in job_graph.vertices:
        for index, op in enumerate(vertex.operator_ids):
            place[str(op)] = (vertex, index)
    vertex_ids = {str(v.id) for v in job_graph.vertices}
    parallelism: dict[str, set[int]] = {}
    per_subtask: dict[str, dict[str, Any]] = {}
    unclaimed: set[str] = set()
    for key, state in checkpoint.tasks.items():
        vertex_id, _, subtask_text = key.rpartition("/")
        subtask = int(subtask_text)
        if state.finished and vertex_id in vertex_ids:  # it had ended: it ends again at once
            per_subtask.setdefault(key, {"operators": []})["finished"] = True
        owners = [op.operator_id for op in state.operators if _holds_state(op)]
        if state.source_offset is not None and state.source_operator:
            owners.append(state.source_operator)
        for op in owners:
            parallelism.setdefault(op, set()).add(subtask)
        for handle in state.operators:
            target = place.get(handle.operator_id)
            if target is None:
                if _holds_state(handle):
                    unclaimed.add(handle.operator_id)
                continue
            vertex, index = target
            _check_kind(checkpoint, handle, vertex, index)
            entry = per_subtask.setdefault(subtask_key(vertex.id, subtask), {"operators": []})
            entry["operators"].append(dataclasses.replace(handle, node=index))
        if state.source_offset is not None and state.source_operator:
            target = place.get(state.source_operator)
            if target is None or target[1] != 0:
                unclaimed.add(state.source_operator)
            else:
                entry = per_subtask.setdefault(subtask_key(target[0].id, subtask), {"operators": []})
                entry["source_offset"] = state.source_offset
                entry["source_operator"] = state.source_operator
    if unclaimed and not allow_non_restored:
        ids = ", ".join(sorted(unclaimed))
        raise CheckpointRestoreException(
            f"Failed to rollback to checkpoint/savepoint {checkpoint.external_pointer}. Cannot map "
            f"checkpoint/savepoint state for operator(s) {ids} to the new program, because the "
            "operator is not available in the new program (operators without a uid() get new "
            "ids each time the program is compiled: give stateful operators and sources a "
            "uid). If you want to allow to skip this, you can set the "
            "--allow-non-restored-state option on the CLI "
            "(execution.savepoint.ignore-unclaimed-state: true).")
    for op, subtasks in parallelism.items():
        target = place.get(op)
        if target is not None and len(subtasks) != target[0].parallelism:
            raise CheckpointRestoreException(
                f"cannot restore operator {op} of {target[0].name!r} from "
                f"{checkpoint.external_pointer}: its state was taken at parallelism "
                f"{len(subtasks)}, the program runs it at {target[0].parallelism} (changing the "
                "parallelism of stateful operators is not supported yet)")
    tasks: Mapping[str, TaskStateSnapshot] = {
        key: TaskStateSnapshot(source_offset=e.get("source_offset"),
                               operators=tuple(sorted(e["operators"], key=lambda h: h.node)),
                               source_operator=e.get("source_operator", ""),
                               finished=bool(e.get("finished")))
        for key, e in per_subtask.items()}
    return dataclasses.replace(checkpoint, tasks=dict(tasks))
