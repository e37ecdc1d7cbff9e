"""The client-side compiler: StreamGraph, chaining, JobGraph generation, plan JSON.

``flintlock.graph.stream_graph_generator`` (transformations -> StreamGraph) is imported on its own
because it depends on ``flintlock.api.transformations``.
"""

from __future__ import annotations

from flintlock.graph.chaining import Chain, compute_chains, is_chainable, topological_order
from flintlock.graph.job_graph_generator import create_job_graph
from flintlock.graph.plan import job_graph_plan, stream_graph_plan, stream_graph_plan_json
from flintlock.graph.stream_graph import (
    ChainingStrategy,
    StreamEdge,
    StreamGraph,
    StreamNode,
    default_max_parallelism,
)

__all__ = [
    "Chain",
    "ChainingStrategy",
    "StreamEdge",
    "StreamGraph",
    "StreamNode",
    "compute_chains",
    "create_job_graph",
    "default_max_parallelism",
    "is_chainable",
    "job_graph_plan",
    "stream_graph_plan",
    "stream_graph_plan_json",
    "topological_order",
]
