"""Builders for running ``SparkStreamTask`` directly in the test thread (no cluster)."""

from __future__ import annotations

import io
from typing import Any

import cloudpickle
import pyarrow as pa

from flintlock.runtime.deployment import (
    InputGateDeploymentDescriptor,
    PartitionLocation,
    ResultPartitionDeploymentDescriptor,
    TaskDeploymentDescriptor,
)
from flintlock.runtime.ids import (
    AllocationID,
    ExecutionAttemptID,
    ExecutionVertexID,
    IntermediateDataSetID,
    IntermediateResultPartitionID,
    JobID,
    JobVertexID,
    OperatorID,
)
from flintlock.runtime.jobgraph.types import ResultPartitionType, ShipStrategy
from flintlock.runtime.operators.specs import (
    ChainedNode,
    OperatorChain,
    OutputSpec,
    SerializedFunction,
)
from flintlock.runtime.spark.stream_task import SparkStreamTask
from flintlock.runtime.taskmanager.invokable import RuntimeEnvironment
from flintlock.runtime.taskmanager.task_execution_state import TaskResult

INVOKABLE = "flintlock.runtime.spark.stream_task:SparkStreamTask"


def fn(f: Any, name: str | None = None) -> SerializedFunction:
    return SerializedFunction(name or getattr(f, "__qualname__", "fn"), cloudpickle.dumps(f))


def nodes(*specs: Any, gates: tuple[int, ...] = (), outputs: tuple[int, ...] = (0,),
          names: tuple[str, ...] = ()) -> tuple[ChainedNode, ...]:
    """A linear chain: node 0 reads ``gates`` (or is a source), the last node feeds ``outputs``."""
    out = []
    for i, spec in enumerate(specs):
        out.append(ChainedNode(
            operator_id=OperatorID.generate(),
            name=names[i] if i < len(names) else type(spec).__name__.removesuffix("Spec"),
            spec=spec,
            gate_inputs=gates if i == 0 else (),
            chained_input=None if i == 0 else i - 1,
            outputs=outputs if i == len(specs) - 1 else (),
        ))
    return tuple(out)


def ipc(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    with pa.ipc.new_stream(buf, table.schema) as w:
        w.write_table(table)
    return buf.getvalue()


def read_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


class Job:
    """One job's ids plus helpers to deploy subtasks of vertices."""

    def __init__(self, shuffle_dir: str, spark_provider: Any) -> None:
        self.job_id = JobID.generate()
        self.shuffle_dir = shuffle_dir
        self.provider = spark_provider
        self.printed: list[str] = []
        #: the job configuration every deployed subtask gets (Flink keys -> strings)
        self.configuration: dict[str, str] = {}

    def tdd(self, chain: OperatorChain, *, vertex: JobVertexID, subtask: int, parallelism: int,
            name: str = "vertex", attempt: int = 0, splits: tuple[Any, ...] = (),
            gates: tuple[InputGateDeploymentDescriptor, ...] = (),
            partitions: tuple[ResultPartitionDeploymentDescriptor, ...] = ()) -> TaskDeploymentDescriptor:
        return TaskDeploymentDescriptor(
            job_id=self.job_id, job_name="test", vertex_name=name,
            attempt_id=ExecutionAttemptID.generate(ExecutionVertexID(vertex, subtask), attempt),
            allocation_id=AllocationID.generate(), number_of_subtasks=parallelism,
            max_parallelism=128, invokable_class=INVOKABLE,
            invokable_payload=cloudpickle.dumps(chain), input_gates=gates,
            produced_partitions=partitions, source_splits=splits,
            job_configuration=dict(self.configuration),
        )

    def env(self, tdd: TaskDeploymentDescriptor) -> RuntimeEnvironment:
        return RuntimeEnvironment(
            tdd=tdd, services={"spark": self.provider, "shuffle_dir": self.shuffle_dir},
            print_fn=self.printed.append,
        )

    def run(self, tdd: TaskDeploymentDescriptor) -> TaskResult:
        return SparkStreamTask(self.env(tdd)).invoke()

    def run_vertex(self, chain: OperatorChain, parallelism: int, *, name: str = "vertex",
                   splits: list[list[Any]] | None = None,
                   gates: list[tuple[InputGateDeploymentDescriptor, ...]] | None = None,
                   subpartitions: tuple[int, ...] = ()) -> list[TaskResult]:
        """Run every subtask of a vertex; output ``i`` gets ``subpartitions[i]`` subpartitions."""
        vertex = JobVertexID.generate()
        results = []
        for s in range(parallelism):
            parts = tuple(
                ResultPartitionDeploymentDescriptor(
                    partition_id=IntermediateResultPartitionID(out.dataset_id, s),
                    ship_strategy=out.ship_strategy, result_type=ResultPartitionType.BLOCKING,
                    number_of_subpartitions=subpartitions[i], key_columns=out.key_columns,
                    max_parallelism=out.max_parallelism,
                )
                for i, out in enumerate(chain.outputs)
            )
            tdd = self.tdd(chain, vertex=vertex, subtask=s, parallelism=parallelism, name=name,
                           splits=tuple(splits[s]) if splits else (),
                           gates=gates[s] if gates else (), partitions=parts)
            results.append(self.run(tdd))
        return results


def output(strategy: ShipStrategy, keys: tuple[str, ...] = (), max_parallelism: int = 128) -> OutputSpec:
    return OutputSpec(IntermediateDataSetID.generate(), strategy, keys, max_parallelism)


def gate(results: list[TaskResult], out_index: int, start: int, end: int,
         strategy: ShipStrategy = ShipStrategy.HASH) -> InputGateDeploymentDescriptor:
    locs: list[PartitionLocation] = [r.partitions[out_index] for r in results]
    return InputGateDeploymentDescriptor(
        dataset_id=locs[0].partition_id.dataset_id, ship_strategy=strategy,
        result_type=ResultPartitionType.BLOCKING, subpartition_start=start, subpartition_end=end,
        partitions=tuple(locs), schema=locs[0].schema,
    )
