"""The gRPC wire format: gateway message round trips, authentication, the restricted unpickler."""

from __future__ import annotations

import datetime
import decimal
import os
import pathlib
import pickle
import uuid
from collections import OrderedDict, deque
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flintlock.connectors.collection import RowRangeSplit, SequenceSource
from flintlock.runtime.deployment import (
    InputGateDeploymentDescriptor,
    PartitionLocation,
    ResultPartitionDeploymentDescriptor,
    TaskDeploymentDescriptor,
)
from flintlock.runtime.dispatcher.exceptions import (
    DuplicateJobSubmissionException,
    FlinkJobNotFoundException,
)
from flintlock.runtime.dispatcher.gateway import ClusterOverview
from flintlock.runtime.executiongraph.archived import (
    ArchivedExecution,
    ArchivedExecutionGraph,
    ArchivedJobVertex,
    ExceptionHistoryEntry,
    JobDetails,
    JobResult,
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
    ResourceID,
    ResultPartitionID,
    SlotID,
)
from flintlock.runtime.jobgraph.job_graph import IntermediateDataSet, JobEdge, JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import (
    ExecutionState,
    JobStatus,
    JobType,
    ResultPartitionType,
    ShipStrategy,
)
from flintlock.runtime.resourcemanager.gateway import (
    RegistrationResponse,
    ResourceOverview,
    ResourceRequirements,
    TaskExecutorRegistration,
    TaskManagerInfo,
)
from flintlock.runtime.rpc.auth import (
    RpcAuthenticationError,
    RpcAuthenticator,
    is_loopback_host,
    process_local_secret,
    resolve_secret,
)
from flintlock.runtime.rpc.codec import (
    CodecError,
    ReplyStatus,
    RequestKind,
    RpcReply,
    RpcRequest,
    WireError,
    decode_reply,
    decode_request,
    dumps,
    encode_reply,
    encode_request,
    loads,
)
from flintlock.runtime.rpc.exceptions import FencingTokenMismatch, RemoteError
from flintlock.runtime.rpc.grpc_service import format_address, parse_address
from flintlock.runtime.rpc.messages import ACK
from flintlock.runtime.taskexecutor.exceptions import SlotAllocationException
from flintlock.runtime.taskexecutor.gateway import SlotOffer, SlotReport, SlotStatus
from flintlock.runtime.taskmanager.task_execution_state import (
    IOMetrics,
    SerializedError,
    TaskExecutionState,
    TaskResult,
)
from flintlock.runtime.thread_dump import ThreadInfo

AUTH = RpcAuthenticator("test-secret")
HEX32 = st.text(alphabet="0123456789abcdef", min_size=32, max_size=32)


def wire_round_trip(value: Any) -> Any:
    """A value as the server sees an argument and the caller sees the reply."""
    body, tag = encode_request(
        AUTH, RpcRequest(RequestKind.CALL, "ep", "m", (value,), {"k": value})
    )
    request, server_tag = decode_request(AUTH, body)
    assert server_tag == tag and request.args[0] == request.kwargs["k"]
    reply = decode_reply(AUTH, tag, encode_reply(AUTH, server_tag, RpcReply.ok(request.args[0])))
    assert reply.status is ReplyStatus.OK
    return reply.value


def _attempt(vertex: JobVertexID, index: int = 0, attempt: int = 0) -> ExecutionAttemptID:
    return ExecutionAttemptID.generate(ExecutionVertexID(vertex, index), attempt)


def _job_graph(source: Any = None) -> JobGraph:
    v0, v1, v2 = JobVertexID.generate(), JobVertexID.generate(), JobVertexID.generate()
    ds0 = IntermediateDataSet(
        IntermediateDataSetID.generate(),
        v0,
        ResultPartitionType.BLOCKING,
        v1,
        ShipStrategy.HASH,
        key_columns=("word",),
    )
    ds1 = IntermediateDataSet(
        IntermediateDataSetID.generate(), v1, ResultPartitionType.BLOCKING, v2, ShipStrategy.FORWARD
    )
    vertices = (
        JobVertex(
            v0,
            "Source: seq",
            2,
            128,
            "flintlock.testing.invokables:NoOpInvokable",
            invokable_payload=b"\x80\x05opaque user code",
            operator_ids=(OperatorID.generate(),),
            operator_names=("Source: seq",),
            results=(ds0,),
            source=source,
        ),
        JobVertex(
            v1,
            "Map",
            3,
            128,
            "flintlock.testing.invokables:NoOpInvokable",
            inputs=(JobEdge(ds0.id, v1, ShipStrategy.HASH),),
            results=(ds1,),
        ),
        JobVertex(
            v2,
            "Sink",
            3,
            128,
            "flintlock.testing.invokables:NoOpInvokable",
            inputs=(JobEdge(ds1.id, v2, ShipStrategy.FORWARD),),
        ),
    )
    return JobGraph(
        JobID.generate(),
        "word count",
        JobType.BATCH,
        vertices,
        {"restart-strategy.type": "none"},
        {"nodes": [{"id": 1, "parallelism": 2}]},
    )


def _tdd() -> TaskDeploymentDescriptor:
    vertex = JobVertexID.generate()
    producer = _attempt(JobVertexID.generate(), 1, 2)
    partition = IntermediateResultPartitionID(IntermediateDataSetID.generate(), 1)
    location = PartitionLocation(
        partition, producer, "/tmp/shuffle/x", (3, 0, 5), (100, 0, 170), "word string, n bigint"
    )
    return TaskDeploymentDescriptor(
        job_id=JobID.generate(),
        job_name="job",
        attempt_id=_attempt(vertex, 2, 1),
        allocation_id=AllocationID.generate(),
        vertex_name="Map -> Filter",
        number_of_subtasks=3,
        max_parallelism=128,
        invokable_class="flintlock.testing.invokables:NoOpInvokable",
        invokable_payload=pickle.dumps(os.system),  # opaque: the codec must never unpickle it
        input_gates=(
            InputGateDeploymentDescriptor(
                partition.dataset_id,
                ShipStrategy.HASH,
                ResultPartitionType.BLOCKING,
                0,
                2,
                (location,),
                "word string, n bigint",
            ),
        ),
        produced_partitions=(
            ResultPartitionDeploymentDescriptor(
                IntermediateResultPartitionID(IntermediateDataSetID.generate(), 2),
                ShipStrategy.REBALANCE,
                ResultPartitionType.BLOCKING,
                4,
                ("k",),
                64,
            ),
        ),
        source_splits=(RowRangeSplit(0, 10), RowRangeSplit(10, 20)),
        job_configuration={"a": "1"},
    )


def _task_states() -> list[TaskExecutionState]:
    attempt = _attempt(JobVertexID.generate())
    job = JobID.generate()
    error = SerializedError.from_exception(ValueError("bad record 42"), non_recoverable=True)
    result = TaskResult(
        partitions=(
            PartitionLocation(
                IntermediateResultPartitionID(IntermediateDataSetID.generate(), 0),
                attempt,
                "/s",
                (1,),
                (8,),
                "x int",
            ),
        ),
        committables={0: "/tmp/sink/.attempt-1", 1: ("a", 2)},
        accumulators={"collect-abc": b"\x00arrow"},
        metrics=IOMetrics(1, 2, 3, 4),
    )
    return [
        TaskExecutionState(job, attempt, ExecutionState.FAILED, error=error, task_manager="tm-1"),
        TaskExecutionState(job, attempt, ExecutionState.FINISHED, result=result),
    ]


def _archived() -> ArchivedExecutionGraph:
    vertex = JobVertexID.generate()
    attempt = _attempt(vertex)
    failure = ExceptionHistoryEntry(
        SerializedError("x.Boom", "boom", "tb"), 1_700_000_000_000, "v (1/1)#0", "tm-1", attempt
    )
    execution = ArchivedExecution(
        attempt,
        ExecutionState.FAILED,
        "tm-1",
        {"DEPLOYING": 1, "FAILED": 2},
        failure.error,
        IOMetrics(1, 1, 1, 1),
    )
    return ArchivedExecutionGraph(
        JobID.generate(),
        "job",
        JobType.BATCH,
        JobStatus.FAILED,
        {"INITIALIZING": 0, "FAILED": 5},
        (ArchivedJobVertex(vertex, "v", 1, 128, "default", (execution,), (execution,)),),
        plan={"nodes": []},
        configuration={"k": "v"},
        failure=failure,
        exception_history=(failure,),
        number_of_restarts=2,
    )


def _gateway_messages() -> list[Any]:
    job, rid = JobID.generate(), ResourceID.generate()
    slot = SlotID(rid, 1)
    archived = _archived()
    return [
        ACK,
        job,
        rid,
        slot,
        JobStatus.RUNNING,
        ExecutionState.CANCELING,
        TaskExecutorRegistration(
            "grpc://h:1/te", rid, 2, 0, {"cpuCores": 4}, {"master": "local[2]"}
        ),
        RegistrationResponse(True, rid),
        RegistrationResponse(False, None, "no"),
        ResourceRequirements(job, "grpc://h:1/jm", 3),
        TaskManagerInfo(rid, "grpc://h:2/te", 0, 2, 1, 123, {"cpuCores": 1}, {}),
        TaskManagerInfo(rid, "grpc://h:2/te", 0, 2, 1, 123, {"cpuCores": 1}, {}, 2.0,
                        {"taskHeap": 1 << 28}, (job,)),
        (ThreadInfo("main", '"main" Id=1 RUNNABLE\n\n'),),
        ClusterOverview(ResourceOverview(2, 4, 1), 1, 2, 3, 4),
        SlotReport((SlotStatus(slot), SlotStatus(SlotID(rid, 2), AllocationID.generate(), job))),
        (SlotOffer(AllocationID.generate(), 0),),
        ResultPartitionID(
            IntermediateResultPartitionID(IntermediateDataSetID.generate(), 3),
            _attempt(JobVertexID.generate()),
        ),
        _job_graph(),
        _tdd(),
        *_task_states(),
        archived,
        archived.details(10),
        JobResult(job, "job", "FAILED", 12, {"collect-x": b"\x01"}, archived.failure),
        JobDetails(job, "j", 1, 2, 1, JobStatus.FINISHED, 2, {"FINISHED": 1}),
    ]


@pytest.mark.parametrize("message", _gateway_messages(), ids=lambda m: type(m).__name__)
def test_gateway_messages_round_trip(message: Any) -> None:
    decoded = wire_round_trip(message)
    assert decoded == message
    assert type(decoded) is type(message)


def test_job_graph_round_trip_keeps_sources_and_opaque_payloads() -> None:
    graph = _job_graph(SequenceSource(1, 100))  # connector objects compare by identity
    decoded = wire_round_trip(graph)
    assert [v.id for v in decoded] == [v.id for v in graph]
    assert decoded.vertices[0].invokable_payload == b"\x80\x05opaque user code"
    source = decoded.vertices[0].source
    assert isinstance(source, SequenceSource) and (source.start, source.end_inclusive) == (1, 100)


def test_user_code_in_a_tdd_stays_opaque_bytes() -> None:
    tdd = wire_round_trip(_tdd())
    assert isinstance(tdd.invokable_payload, bytes)
    assert tdd.invokable_payload == pickle.dumps(os.system)


@given(
    HEX32, st.sampled_from([JobID, JobVertexID, AllocationID, IntermediateDataSetID, OperatorID])
)
def test_hex_ids_round_trip(hex_text: str, id_type: type[Any]) -> None:
    value = id_type(hex_text)
    assert loads(dumps(value)) == value
    assert wire_round_trip(value) == value


@given(
    st.text(min_size=1, max_size=256),
    st.integers(0, 2**31),
    HEX32,
    st.integers(0, 1000),
    st.text(alphabet="0123456789abcdef", max_size=8),
)
def test_composite_ids_round_trip(
    resource: str, slot: int, vertex: str, index: int, nonce: str
) -> None:
    slot_id = SlotID(ResourceID(resource), slot)
    attempt = ExecutionAttemptID(ExecutionVertexID(JobVertexID(vertex), index), slot, nonce)
    assert wire_round_trip((slot_id, attempt)) == (slot_id, attempt)


def test_safe_standard_types_round_trip() -> None:
    value = {
        "when": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
        "day": datetime.date(2024, 1, 2),
        "d": datetime.timedelta(seconds=3),
        "money": decimal.Decimal("1.25"),
        "id": uuid.uuid4(),
        "path": pathlib.PurePosixPath("/a/b"),
        "ordered": OrderedDict(a=1),
        "queue": deque([1, 2]),
        "set": {1, 2},
        "frozen": frozenset({3}),
        "bytes": bytearray(b"x"),
        "complex": 1 + 2j,
        "range": range(3),
        "slice": slice(1, 2),
    }
    assert loads(dumps(value)) == value


# ---- the restricted unpickler ---------------------------------------------------------------


class _RunsShell:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> Any:
        return (os.system, (self.command,))


def _global_pickle(module: str, name: str) -> bytes:
    """A protocol-0 GLOBAL opcode for ``module.name``, then STOP."""
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n."


def test_refuses_os_system_payload_and_runs_nothing(tmp_path: pathlib.Path) -> None:
    marker = tmp_path / "pwned"
    evil = pickle.dumps(_RunsShell(f"touch {marker}"))
    with pytest.raises(CodecError, match=r"refusing to unpickle (posix|os)\.system"):
        loads(evil)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("builtins", "eval"),
        ("builtins", "getattr"),
        ("builtins", "object"),
        ("subprocess", "Popen"),
        ("fractions", "Fraction"),
        ("flintlock.runtime.rpc.codec", "dumps"),  # a function of a flintlock module
        ("flintlock.runtime.rpc.codec", "pickle"),  # a module re-exported by a flintlock module
        ("flintlock.runtime.jobgraph.job_graph", "Mapping"),  # a foreign class re-exported
        ("flintlock.runtime.ids", "uuid.UUID.__class__"),
        ("collections.abc", "Mapping"),
    ],
)
def test_refuses_globals_outside_the_allow_list(module: str, name: str) -> None:
    with pytest.raises(CodecError, match="refusing to unpickle"):
        loads(_global_pickle(module, name))


def test_refuses_non_flintlock_classes_in_messages() -> None:
    with pytest.raises(CodecError, match="fractions.Fraction"):
        loads(dumps({"x": Fraction(1, 3)}))


def test_unpicklable_arguments_fail_on_the_caller_side() -> None:
    with pytest.raises(CodecError, match="cannot encode the arguments of m"):
        encode_request(AUTH, RpcRequest(RequestKind.CALL, "ep", "m", (lambda: 1,)))


def test_unpicklable_reply_becomes_an_error_reply() -> None:
    body, tag = encode_request(AUTH, RpcRequest(RequestKind.CALL, "ep", "m"))
    reply = decode_reply(AUTH, tag, encode_reply(AUTH, tag, RpcReply.ok(lambda: 1)))
    assert reply.status is ReplyStatus.ERROR and reply.error is not None
    assert isinstance(reply.error.to_exception(), CodecError)


# ---- authentication --------------------------------------------------------------------------


def test_a_request_with_a_wrong_tag_is_rejected_before_unpickling(tmp_path: pathlib.Path) -> None:
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_RunsShell(f"touch {marker}"))
    forged = RpcAuthenticator("attacker-guess").request_tag(payload) + payload
    with pytest.raises(RpcAuthenticationError):
        decode_request(AUTH, forged)
    with pytest.raises(RpcAuthenticationError, match="no authentication tag"):
        decode_request(AUTH, b"short")
    assert not marker.exists()


def test_tampered_payload_and_foreign_replies_are_rejected() -> None:
    body, tag = encode_request(AUTH, RpcRequest(RequestKind.CALL, "ep", "m", (1,)))
    with pytest.raises(RpcAuthenticationError):
        decode_request(AUTH, body[:-2] + b"\x00.")
    _, other_tag = encode_request(AUTH, RpcRequest(RequestKind.CALL, "ep", "m", (2,)))
    reply = encode_reply(AUTH, other_tag, RpcReply.ok(5))
    with pytest.raises(RpcAuthenticationError):
        decode_reply(AUTH, tag, reply)  # a reply to another request
    with pytest.raises(RpcAuthenticationError):
        decode_reply(RpcAuthenticator("other"), other_tag, reply)


def test_secret_rules() -> None:
    assert resolve_secret("s3cret", "0.0.0.0") == "s3cret"
    assert (
        resolve_secret(None, "127.0.0.1") == process_local_secret() == resolve_secret(None, "::1")
    )
    with pytest.raises(ValueError, match=r"security\.cluster\.secret"):
        resolve_secret(None, "0.0.0.0")
    with pytest.raises(ValueError, match=r"security\.cluster\.secret"):
        resolve_secret(None, "10.1.2.3")
    with pytest.raises(ValueError, match="empty"):
        resolve_secret("", "127.0.0.1")
    assert is_loopback_host("localhost") and is_loopback_host("127.0.0.2")
    assert not is_loopback_host("") and not is_loopback_host("example.org")


# ---- exceptions across the wire --------------------------------------------------------------


@pytest.mark.parametrize(
    "exc",
    [
        FencingTokenMismatch("stale token"),
        SlotAllocationException("slot 1 is taken"),
        DuplicateJobSubmissionException("job abc exists"),
        CodecError("nope"),
        FlinkJobNotFoundException("abc"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_flintlock_exceptions_come_back_as_their_class(exc: Exception) -> None:
    body, tag = encode_request(AUTH, RpcRequest(RequestKind.CALL, "ep", "m"))
    reply = decode_reply(AUTH, tag, encode_reply(AUTH, tag, RpcReply.failed(exc)))
    assert reply.error is not None
    rebuilt = reply.error.to_exception()
    assert type(rebuilt) is type(exc) and str(rebuilt) == str(exc)
    assert type(exc).__name__ in rebuilt.remote_traceback  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("exc", "type_name"),
    [
        (ValueError("bad"), "ValueError"),
        (RemoteError("x.Y", "inner"), "flintlock.runtime.rpc.exceptions.RemoteError"),
    ],
)
def test_other_exceptions_come_back_as_remote_error(exc: Exception, type_name: str) -> None:
    rebuilt = WireError.from_exception(exc).to_exception()
    assert isinstance(rebuilt, RemoteError)
    assert rebuilt.type_name == type_name and rebuilt.remote_message == str(exc)


def test_unknown_flintlock_class_is_not_imported() -> None:
    rebuilt = WireError("flintlock.not_loaded_module", "Boom", "m").to_exception()
    assert (
        isinstance(rebuilt, RemoteError) and rebuilt.type_name == "flintlock.not_loaded_module.Boom"
    )


def test_addresses() -> None:
    assert (
        format_address("127.0.0.1", 6123, "resourcemanager")
        == "grpc://127.0.0.1:6123/resourcemanager"
    )
    assert parse_address("grpc://[::1]:5/taskexecutor-h:1-ab") == ("::1", 5, "taskexecutor-h:1-ab")
    assert parse_address(format_address("::1", 7, "x")) == ("::1", 7, "x")
    for bad in ("inproc://x", "grpc://host/x", "grpc://host:1/", "grpc://:1/x", "grpc://h:p/x"):
        with pytest.raises(ValueError):
            parse_address(bad)
