"""Tiny builders for hand-made StreamGraphs."""

from __future__ import annotations

from typing import Any

from flintlock.graph.stream_graph import ChainingStrategy, StreamEdge, StreamGraph, StreamNode
from flintlock.runtime.ids import OperatorID
from flintlock.runtime.jobgraph.types import JobType, ShipStrategy
from flintlock.runtime.operators.specs import FilterSpec, SinkSpec, SourceSpec, UnionSpec

FWD = ShipStrategy.FORWARD


def node(nid: int, spec: Any = None, *, p: int = 2, maxp: int = 128, ssg: str = "default",
         cs: ChainingStrategy = ChainingStrategy.ALWAYS, name: str | None = None) -> StreamNode:
    return StreamNode(
        id=nid, name=name or f"op{nid}", operator_id=OperatorID(f"{nid:032x}"),
        spec=spec if spec is not None else FilterSpec(f"c{nid}"), parallelism=p,
        max_parallelism=maxp, slot_sharing_group=ssg, chaining_strategy=cs,
    )


def source(nid: int, **kw: Any) -> StreamNode:
    return node(nid, SourceSpec(f"src{nid}"), **kw)


def sink(nid: int, **kw: Any) -> StreamNode:
    return node(nid, SinkSpec(f"sink{nid}"), **kw)


def union(nid: int, **kw: Any) -> StreamNode:
    return node(nid, UnionSpec(), **kw)


def edge(a: int, b: int, part: ShipStrategy = FWD, keys: tuple[str, ...] = (),
         type_number: int = 0) -> StreamEdge:
    return StreamEdge(a, b, part, keys, type_number)


def graph(nodes: list[StreamNode], edges: list[StreamEdge], chaining: bool = True) -> StreamGraph:
    return StreamGraph("test", JobType.BATCH, tuple(nodes), tuple(edges), chaining)
