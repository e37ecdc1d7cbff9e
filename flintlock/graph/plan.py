"""Flink's execution plan JSON for a StreamGraph and for a JobGraph.

Shapes:
- StreamGraph plan (``env.get_execution_plan()``, Flink ``streaming/api/graph/JSONGenerator``)::

    {"nodes": [{"id": 1, "type": "Source: ...", "pact": "Data Source", "contents": "Source: ...",
                "parallelism": 4},
               {"id": 2, "type": "Filter", "pact": "Operator", "contents": "Filter",
                "parallelism": 4,
                "predecessors": [{"id": 1, "ship_strategy": "FORWARD", "side": "second"}]}]}

- JobGraph plan (``JobGraph.plan``, Flink ``runtime/jobgraph/jsonplan/JsonPlanGenerator``)::

    {"jid": "<hex>", "name": "...", "type": "BATCH",
     "nodes": [{"id": "<vertex hex>", "parallelism": 4, "operator": "",
                "operator_strategy": "", "description": "Source: ... -&gt; Filter",
                "inputs": [{"num": 0, "id": "<producer vertex hex>", "ship_strategy": "HASH",
                            "exchange": "blocking"}],
                "optimizer_properties": {}}]}

  As in Flink 2.x, whose JobVertices carry no operator name or description (those were the
  DataSet optimizer's), ``operator`` and ``operator_strategy`` are empty and ``description``
  names the vertex, HTML-escaped (``runtime.jobgraph.json_plan.plan_description``). The web
  dashboard's job graph prints ``operator`` and then the vertex name on each node, so a
  non-empty ``operator`` showed the name twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from flintlock.graph.chaining import topological_order
from flintlock.graph.stream_graph import StreamGraph
from flintlock.runtime.ids import JobID
from flintlock.runtime.jobgraph.job_graph import JobVertex
from flintlock.runtime.jobgraph.json_plan import plan_description
from flintlock.runtime.jobgraph.types import JobType

__all__ = ["job_graph_plan", "stream_graph_plan", "stream_graph_plan_json"]


def stream_graph_plan(graph: StreamGraph) -> dict[str, Any]:
    """The StreamGraph plan as a dict (nodes in topological order)."""
    nodes: list[dict[str, Any]] = []
    for nid in topological_order(graph):
        node = graph.node(nid)
        entry: dict[str, Any] = {
            "id": node.id,
            "type": node.name,
            "pact": node.pact,
            "contents": node.name,
            "parallelism": node.parallelism,
        }
        ins = graph.in_edges(nid)
        if ins:
            entry["predecessors"] = [
                {"id": e.source_id, "ship_strategy": e.partitioner.value, "side": "second"}
                for e in ins
            ]
        nodes.append(entry)
    return {"nodes": nodes}


def stream_graph_plan_json(graph: StreamGraph) -> str:
    """The StreamGraph plan as Flink prints it (a JSON string)."""
    return json.dumps(stream_graph_plan(graph), indent=2)


def job_graph_plan(
    job_id: JobID, name: str, job_type: JobType, vertices: Sequence[JobVertex]
) -> dict[str, Any]:
    """The JobGraph plan dict for ``JobGraph.plan`` (vertices in the given topological order)."""
    producer_of = {ds.id: v.id for v in vertices for ds in v.results}
    result_type_of = {ds.id: ds.result_type for v in vertices for ds in v.results}
    nodes: list[dict[str, Any]] = []
    for v in vertices:
        entry: dict[str, Any] = {
            "id": str(v.id),
            "parallelism": v.parallelism,
            "operator": "",
            "operator_strategy": "",
            "description": plan_description(v.name),
        }
        if v.inputs:
            entry["inputs"] = [
                {
                    "num": e.type_number,
                    "id": str(producer_of[e.source]),
                    "ship_strategy": e.ship_strategy.value,
                    "exchange": result_type_of[e.source].value.lower(),
                }
                for e in v.inputs
            ]
        entry["optimizer_properties"] = {}
        nodes.append(entry)
    return {"jid": str(job_id), "name": name, "type": job_type.value, "nodes": nodes}
