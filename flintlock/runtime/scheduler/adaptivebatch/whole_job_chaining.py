"""Whole-job chaining: a BATCH job whose every vertex runs one subtask runs as one task (pure).

Runtime chaining (``runtime_chaining``) takes a one-subtask vertex's only consumer into it, one
vertex at a time; a join or a union (several inputs) still reads its inputs back from result
partitions in a Spark job of its own. On a cluster with one Spark server (local mode, a
session cluster of one TaskManager, TaskManagers sharing one ``spark.remote``) the
AdaptiveBatchScheduler sizes every automatically sized vertex at one subtask
(``AutoParallelismSettings.decided_at_most``), so TPC-H Q11 ran as seven one-subtask vertices,
seven rounds of Spark jobs with a Parquet exchange between each, where plain PySpark runs one
plan. Flink's batch planner fuses such operators into one task too (``BatchExecMultipleInput``,
``table.optimizer.multiple-input-enabled``, with its sources chained into that task:
``MultipleInputStreamTask``'s chained sources).

``whole_job_chain`` decides it when scheduling starts, before any vertex is initialized: when
every vertex will run exactly one subtask (``one_subtask``), all edges are BLOCKING and all
vertices share one slot sharing group, every vertex after the first source (in topological
order) is chained into that source (``ExecutionGraph.chain_consumer``). Its one task runs every
vertex's chain in one Spark session (``runtime/spark/whole_job.py``): each vertex reads its
inputs as the DataFrames of their producers' outputs instead of partitions, and no result
partition is written. Spark plans the whole job as PySpark would (its own shuffles, adaptive
query execution and broadcast joins). Failover then restarts that one task, which is what a
one-subtask job's regions amount to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.executiongraph.execution_vertex import ExecutionJobVertex
from flintlock.runtime.ids import JobVertexID
from flintlock.runtime.jobgraph.job_graph import JobVertex
from flintlock.runtime.jobgraph.types import ShipStrategy

__all__ = ["one_subtask", "whole_job_chain"]


def one_subtask(graph: ExecutionGraph, splits: Mapping[JobVertexID, list[list[Any]]],
                at_most: Callable[[JobVertex, int], int]) -> bool:
    """Whether every vertex of the job will run exactly one subtask, as the
    AdaptiveBatchScheduler decides them: a set parallelism of 1; a source sized at run time
    whose splits were enumerated for one subtask; another vertex sized at run time that gets
    one because ``at_most`` (``AutoParallelismSettings.decided_at_most``) allows no more, or
    that reads a GLOBAL input, or a FORWARD input of a one-subtask producer."""
    for vertex in graph.job_vertices.values():  # the JobGraph's (topological) order
        jv = vertex.job_vertex
        upper = graph.dynamic_vertices.get(jv.id)
        if upper is None:
            if jv.parallelism != 1:
                return False
        elif jv.source is not None:  # its splits were enumerated for its parallelism
            if (len(splits[jv.id]) if splits.get(jv.id) else upper) != 1:
                return False
        elif at_most(jv, upper) != 1 and not any(
                e.ship_strategy in (ShipStrategy.GLOBAL, ShipStrategy.FORWARD) for e in jv.inputs):
            return False
    return True


def whole_job_chain(graph: ExecutionGraph, splits: Mapping[JobVertexID, list[list[Any]]],
                    at_most: Callable[[JobVertex, int], int]) -> list[ExecutionJobVertex]:
    """The job's first source followed by the vertices to chain into it, in chaining
    (topological) order; empty when the job does not qualify (see the module docstring): a
    vertex may run more than one subtask (``one_subtask`` with ``splits`` and ``at_most``), a
    vertex is initialized or chained already, a result is not BLOCKING, there are several slot
    sharing groups, or fewer than two vertices."""
    ordered = list(graph.job_vertices.values())  # the JobGraph's (topological) order
    if len(ordered) < 2 or not one_subtask(graph, splits, at_most):
        return []
    group = ordered[0].job_vertex.slot_sharing_group
    for vertex in ordered:
        jv = vertex.job_vertex
        if vertex.initialized or vertex.chained_into is not None or vertex.chained_consumers \
                or jv.slot_sharing_group != group \
                or any(not ds.result_type.is_blocking() for ds in jv.results):
            return []
    return ordered
