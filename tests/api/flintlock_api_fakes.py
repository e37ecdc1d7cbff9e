"""Stand-ins for connectors and the executor, so API tests run without Spark or a cluster."""

from __future__ import annotations

import io
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest

import flintlock  # noqa: F401  (sets SPARK_CONNECT_MODE_ENABLED first)


@dataclass
class FakeSource:
    text: str = "Fake: /data"

    def describe(self) -> str:
        return self.text

    def output_schema(self) -> str | None:
        return None

    def enumerate_splits(self, parallelism: int) -> list[list[Any]]:
        return [[] for _ in range(parallelism)]


@dataclass
class FakeSink:
    text: str = "Fake: /out"

    def describe(self) -> str:
        return self.text


class _CollectionSource:
    def __init__(self, arrow_ipc: bytes, schema_ddl: str) -> None:
        self.arrow_ipc = arrow_ipc
        self.schema_ddl = schema_ddl

    def describe(self) -> str:
        return "Collection"


class _SequenceSource:
    def __init__(self, start: int, end_inclusive: int) -> None:
        self.start = start
        self.end_inclusive = end_inclusive

    def describe(self) -> str:
        return f"Sequence({self.start}, {self.end_inclusive})"


class _PrintSink:
    def __init__(self, prefix: str | None = None) -> None:
        self.prefix = prefix

    def describe(self) -> str:
        return "Print"


class _CollectSink:
    def __init__(self, uid: str) -> None:
        self.uid = uid

    def describe(self) -> str:
        return "Collect"


def install_connector_standins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replace the connector modules the API imports by stand-ins with the same constructors.

    The API tests check what the API hands to connectors, not the connectors themselves.
    """
    import flintlock.connectors  # noqa: F401  (the real package first: its __init__ needs them)

    stand_ins = {
        "flintlock.connectors.collection": {
            "CollectionSource": _CollectionSource, "SequenceSource": _SequenceSource},
        "flintlock.connectors.sinks": {"PrintSink": _PrintSink, "CollectSink": _CollectSink},
    }
    for name, attrs in stand_ins.items():
        module = types.ModuleType(name)
        for k, v in attrs.items():
            setattr(module, k, v)
        monkeypatch.setitem(sys.modules, name, module)


def ipc(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue()


@dataclass
class FakeResult:
    accumulators: dict[str, Any] = field(default_factory=dict)


class FakeJobClient:
    def __init__(self, result: FakeResult) -> None:
        self.result = result

    def get_job_execution_result(self) -> FakeResult:
        return self.result


@dataclass
class FakeExecutor:
    """Records submitted JobGraphs; answers collect sinks with ``per_subtask`` Arrow tables."""

    per_subtask: dict[int, pa.Table] = field(default_factory=dict)
    submitted: list[Any] = field(default_factory=list)
    configurations: list[Any] = field(default_factory=list)

    def __call__(self, job_graph: Any, configuration: Any) -> FakeJobClient:
        self.submitted.append(job_graph)
        self.configurations.append(configuration)
        acc: dict[str, Any] = {}
        for v in job_graph.vertices:
            for s in v.sinks:
                uid = getattr(s, "uid", None)
                if uid is not None:
                    for i, t in self.per_subtask.items():
                        acc[f"collect-{uid}/{i}"] = ipc(t)
        return FakeJobClient(FakeResult(acc))
