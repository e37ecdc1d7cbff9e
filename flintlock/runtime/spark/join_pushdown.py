"""Chain rewrites for a hash join the AdaptiveBatchScheduler moved into its probe side (pure).

Flink's FLIP-470 turns a hash join whose build side turns out small into a broadcast join and
lets the probe side reach it without a shuffle. flintlock runs the join in the probe side's
producer instead (``AdaptiveBatchScheduler._push_join``): the producer's task gets one more input
gate that reads the build side whole and a copy of the join vertex's head ``JoinSpec``, run as a
broadcast join chained to its output (``chain_join_to_output``); the join vertex's task then
reads the joined rows from its probe gate and skips its head join (``read_joined_probe``). The
rows that cross the exchange are the join's output instead of the probe side's input: for TPC-H
Q3, 30 thousand joined rows instead of 3.2 million ``lineitem`` rows.

Both rewrites keep what the join vertex's successors see: the probe side is projected to the
columns its exchange would have carried (``ConsumedColumnsSpec``, as ``consumed_only``), the join
keeps its left/right order, and the joined output's exchange keeps the probe side's HASH keys
(equal to the build side's keys on joined rows), so a chained keyed operator after the join
still sees all rows of a key in one subtask.

A join type that cannot broadcast the build side but drops the probe side's unmatched rows (a
semi join's right side) is not moved: the producer only chains a broadcast semi join on the
join's keys (``reduce_only``), so its rows without a partner stay home, and the join vertex runs
as compiled.
"""

from __future__ import annotations

import dataclasses

from flintlock.runtime.ids import IntermediateDataSetID
from flintlock.runtime.operators import specs as S
from flintlock.runtime.spark.consumer_chaining import fed_output
from flintlock.runtime.spark.errors import OperatorException

__all__ = ["chain_join_to_output", "duplicate_column_error", "read_joined_probe"]


def chain_join_to_output(chain: S.OperatorChain, output_dataset: IntermediateDataSetID,
                         join_chain: S.OperatorChain, probe_side: str, build_gate: int,
                         vertex_name: str, reduce_only: bool = False) -> S.OperatorChain:
    """``chain`` with ``join_chain``'s head join appended before output ``output_dataset``.

    The output's node feeds a ``ConsumedColumnsSpec`` (the output's columns) and then the join,
    a broadcast join of the other side read from gate ``build_gate``; the output is written
    from the join with all its columns. ``reduce_only``: a broadcast semi join on the join's
    keys instead, which keeps this side's rows whose keys the other side has (the join type
    drops the others; the consumer still runs its join).

    Raises:
        OperatorException: (non-recoverable) no such output, or the head of ``join_chain`` is
            not a hash join that may broadcast the side opposite ``probe_side`` (or, with
            ``reduce_only``, that drops ``probe_side``'s unmatched rows).
    """
    head = join_chain.head()
    spec = head.spec
    build = "right" if probe_side == "left" else "left"
    allowed = S.BROADCAST_RIGHT_JOINS if build == "right" else S.BROADCAST_LEFT_JOINS
    how = spec.how.lower() if isinstance(spec, S.JoinSpec) else ""
    fits = probe_side in S.REDUCIBLE_SIDES.get(how, ()) if reduce_only else how in allowed
    if not isinstance(spec, S.JoinSpec) or spec.broadcast or probe_side not in ("left", "right") \
            or not fits or how == "cross":
        raise OperatorException(
            f"vertex '{vertex_name}' was deployed to run the {build}-side broadcast join of its "
            f"consumer, whose head is {head.name!r} ({type(spec).__name__}"
            f"{' ' + spec.how if isinstance(spec, S.JoinSpec) else ''})", non_recoverable=True)
    index, feeding = fed_output(
        chain, output_dataset, f"vertex '{vertex_name}' was deployed to run its consumer's "
        f"join on output {output_dataset}, which its chain does not have")
    output = chain.outputs[index]
    nodes = list(chain.nodes)
    node = nodes[feeding]
    nodes[feeding] = dataclasses.replace(node, outputs=tuple(o for o in node.outputs if o != index))
    nodes.append(S.ChainedNode(head.operator_id, f"{head.name} (consumed columns)",
                               S.ConsumedColumnsSpec(output.columns), (), feeding, ()))
    if reduce_only:  # this side's keys on the left, whichever side of the join it is
        mine, theirs = (spec.left_on, spec.right_on) if probe_side == "left" \
            else (spec.right_on, spec.left_on)
        join = S.JoinSpec("semi", tuple(mine), tuple(theirs), broadcast="right")
        name = f"{head.name} (keys of the {build} side)"
        build = "right"
    else:
        join = dataclasses.replace(spec, broadcast=build, probe="", probe_bytes=0)
        name = head.name
    nodes.append(S.ChainedNode(head.operator_id, name, join, (build_gate,), len(nodes) - 1,
                               (index,)))
    outputs = list(chain.outputs)
    outputs[index] = dataclasses.replace(output, columns=None)
    return S.OperatorChain(nodes=tuple(nodes), outputs=tuple(outputs))


def read_joined_probe(chain: S.OperatorChain, probe_side: str, vertex_name: str) -> S.OperatorChain:
    """``chain`` whose head hash join ran in its ``probe_side`` producers: the head reads that
    gate's (joined) rows and passes them on.

    Raises:
        OperatorException: (non-recoverable) the head is not a two-gate hash join.
    """
    head = chain.head()
    if not isinstance(head.spec, S.JoinSpec) or head.spec.broadcast or len(head.gate_inputs) != 2 \
            or probe_side not in ("left", "right"):
        raise OperatorException(
            f"vertex '{vertex_name}' was deployed to read its {probe_side!r} input already "
            f"joined, but its head is {head.name!r} ({type(head.spec).__name__})",
            non_recoverable=True)
    gate = head.gate_inputs[0 if probe_side == "left" else 1]
    node = dataclasses.replace(head, spec=S.UnionSpec(), gate_inputs=(gate,))
    return dataclasses.replace(chain, nodes=(node, *chain.nodes[1:]))


def duplicate_column_error(exc: BaseException, consumer_name: str,
                           vertex_name: str) -> OperatorException | None:
    """The error to raise when writing a moved join's rows failed on a duplicate column name
    (sides sharing a column other than merged keys; an exchange cannot carry two columns of
    one name), else None. Checked on failure only, so a moved join costs no extra round trip.
    The error is non-recoverable and says what to do."""
    text = str(exc)
    if "COLUMN_ALREADY_EXISTS" not in text and "AMBIGUOUS_REFERENCE" not in text:
        return None
    error = OperatorException(
        f"vertex '{vertex_name}' runs the join of '{consumer_name}' (adaptive broadcast join), "
        "whose two sides have a column name in common; the joined rows cannot cross the "
        "exchange with duplicate names. Rename the column on one side before the join, or set "
        f"table.optimizer.adaptive-broadcast-join.strategy: NONE. Spark said: {text[:400]}",
        non_recoverable=True)
    error.__cause__ = exc
    return error
