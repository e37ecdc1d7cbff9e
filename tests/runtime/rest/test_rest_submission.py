"""``POST /jobs``: authentication, size limits, versions, the JobGraph codec, dispatcher errors."""

from __future__ import annotations

import json
import os
import pickle

import pytest

from flintlock.connectors.file import FileSource
from flintlock.runtime.dispatcher.exceptions import (
    DuplicateJobSubmissionException,
    JobSubmissionException,
)
from flintlock.runtime.ids import IntermediateDataSetID, JobID, JobVertexID, OperatorID
from flintlock.runtime.jobgraph.job_graph import IntermediateDataSet, JobEdge, JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import JobType, ResultPartitionType, ShipStrategy
from flintlock.runtime.rest.multipart import MultipartError, parse_multipart
from flintlock.runtime.rest.submission import (
    JobGraphDecodeError,
    check_client_versions,
    deserialize_job_graph,
    serialize_job_graph,
    server_versions,
)


def _job_graph() -> JobGraph:
    src, sink = JobVertexID.generate(), JobVertexID.generate()
    ds = IntermediateDataSet(IntermediateDataSetID.generate(), src, ResultPartitionType.BLOCKING,
                             sink, ShipStrategy.HASH, ("word",))
    return JobGraph(
        JobID.generate(), "wordcount", JobType.BATCH,
        (
            JobVertex(src, "Source: lines -> Map", 2, 128, "flintlock.runtime.spark:Task",
                      b"\x80\x05cloudpickled\r\n--boundary-ish\x00",
                      (OperatorID.generate(), OperatorID.generate()), ("Source: lines", "Map"),
                      results=(ds,), source=FileSource.text("/tmp/in.txt")),
            JobVertex(sink, "Sum", 1, 128, "flintlock.runtime.spark:Task", b"payload",
                      inputs=(JobEdge(ds.id, sink, ShipStrategy.HASH),)),
        ),
        {"execution.runtime-mode": "BATCH"},
        {"jid": "x", "nodes": [{"id": "a", "inputs": []}]},
    )


def _request(versions: dict[str, str] | None = None, file_name: str = "job.graph") -> str:
    return json.dumps({"jobGraphFileName": file_name, "client": versions or server_versions()})


def _submit(rest, job_graph: JobGraph | None = None, *, secret: str | None = "default",
            request: str | None = None, data: bytes | None = None):
    headers = {}
    token = rest.secret if secret == "default" else secret
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    payload = data if data is not None else serialize_job_graph(job_graph or _job_graph())
    return rest.client.post(
        "/v1/jobs", headers=headers, data={"request": request or _request()},
        files={"job.graph": ("job.graph", payload, "application/octet-stream")},
    )


# ---- codec ---------------------------------------------------------------------------------------


def test_codec_round_trip():
    jg = _job_graph()
    assert deserialize_job_graph(serialize_job_graph(jg)) == jg


def _stack_global(module: str, name: str) -> bytes:
    """A protocol-4 pickle loading ``module.name`` (dotted names allowed by protocol 4)."""
    m, n = module.encode(), name.encode()
    return b"\x80\x04\x8c" + bytes([len(m)]) + m + b"\x8c" + bytes([len(n)]) + n + b"\x93."


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


@pytest.mark.parametrize("payload", [
    pickle.dumps(_Evil()),
    pickle.dumps(os.getcwd),
    # a flintlock module re-exporting another library's callable is not a flintlock class
    b"cflintlock.runtime.rest.submission\npickle\n.",
    _stack_global("flintlock.runtime.rest.submission", "pickle.loads"),
    b"cflintlock.__main__\nmain\n.",
], ids=["os.system", "builtin-function", "re-export", "dotted-name", "__main__"])
def test_codec_refuses_non_flintlock_globals(payload):
    with pytest.raises(JobGraphDecodeError, match="may only contain flintlock classes"):
        deserialize_job_graph(payload)


class _Constructs:
    """Pickles as a call of ``cls(*args)``: what an attacker sends to run a constructor."""

    def __init__(self, cls, *args):
        self.cls, self.args = cls, args

    def __reduce__(self):
        return (self.cls, self.args)


def test_codec_runs_no_flintlock_constructor_with_side_effects(tmp_path):
    from flintlock.runtime.logs.files import LogDirectory
    from flintlock.runtime.rest.jar_store import JarStore

    for cls in (LogDirectory, JarStore):
        target = tmp_path / cls.__name__
        with pytest.raises(JobGraphDecodeError, match=f"may not call .*{cls.__name__}"):
            deserialize_job_graph(pickle.dumps(_Constructs(cls, str(target))))
        assert not target.exists()  # nothing was created


def test_codec_refuses_old_protocol_constructor_calls(tmp_path):
    from flintlock.runtime.logs.files import LogDirectory

    target = tmp_path / "made-by-inst"
    for protocol in (0, 1):
        with pytest.raises(JobGraphDecodeError):
            deserialize_job_graph(pickle.dumps(_Constructs(LogDirectory, str(target)), protocol))
    inst = b"(V" + str(target).encode() + b"\niflintlock.runtime.logs.files\nLogDirectory\n."
    with pytest.raises(JobGraphDecodeError, match="INST or OBJ"):
        deserialize_job_graph(inst)
    assert not target.exists()
    # the same bytes do construct a LogDirectory with an unrestricted unpickler
    pickle.loads(inst)
    assert target.exists()


def test_codec_loads_enums():
    payload = pickle.dumps(_Constructs(ShipStrategy, ShipStrategy.FORWARD.value))
    with pytest.raises(JobGraphDecodeError, match="holds a ShipStrategy, not a JobGraph"):
        deserialize_job_graph(payload)


def test_codec_refuses_other_objects_and_garbage():
    with pytest.raises(JobGraphDecodeError, match="not a JobGraph"):
        deserialize_job_graph(pickle.dumps({"a": 1}))
    with pytest.raises(JobGraphDecodeError, match="could not be read"):
        deserialize_job_graph(b"not a pickle")
    with pytest.raises(JobGraphDecodeError, match="could not be read"):
        deserialize_job_graph(serialize_job_graph(_job_graph())[:-20])


def test_version_check_names_both_versions():
    server = {"python": "3.11.7", "pyspark": "4.3.0"}
    check_client_versions({"python": "3.11.2", "pyspark": "4.3.0"}, server)  # patch may differ
    with pytest.raises(ValueError, match=r"Python 3\.12\.1 .*Python 3\.11\.7"):
        check_client_versions({"python": "3.12.1", "pyspark": "4.3.0"}, server)
    with pytest.raises(ValueError, match=r"pyspark 4\.0\.1 .*pyspark 4\.3\.0"):
        check_client_versions({"python": "3.11.7", "pyspark": "4.0.1"}, server)


def test_multipart_parser_keeps_binary_parts_exact():
    body = (b"--xyz\r\nContent-Disposition: form-data; name=\"request\"\r\n\r\n{}\r\n"
            b"--xyz\r\nContent-Disposition: form-data; name=\"f\"; filename=\"job.graph\"\r\n"
            b"Content-Type: application/octet-stream\r\n\r\n\r\n--xy\r\n\x00\r\n--xyz--\r\n")
    request, file = parse_multipart(body, "xyz")
    assert (request.name, request.filename, request.data) == ("request", None, b"{}")
    assert (file.name, file.filename, file.data) == ("f", "job.graph", b"\r\n--xy\r\n\x00")
    with pytest.raises(MultipartError):
        parse_multipart(b"--xyz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nno end", "xyz")


# ---- POST /jobs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["/v1", ""])
def test_submission_round_trip(rest, prefix):
    jg = _job_graph()
    r = rest.client.post(
        f"{prefix}/jobs", headers={"Authorization": f"Bearer {rest.secret}"},
        data={"request": _request()},
        files={"job.graph": ("job.graph", serialize_job_graph(jg), "application/octet-stream")},
    )
    assert r.status_code == 202, r.text
    assert r.json() == {"jobUrl": f"/jobs/{jg.job_id}"}
    (call,) = rest.calls("submit_job")
    assert call.args[0] == jg


@pytest.mark.parametrize("secret", [None, "wrong", "", "s3cret-token-and-more"])
def test_submission_without_the_secret_is_401_and_never_read(rest, secret):
    consumed = []

    def body():
        consumed.append(True)
        yield b"--x\r\n"

    headers = {"Content-Type": "multipart/form-data; boundary=x"}
    if secret is not None:
        headers["Authorization"] = f"Bearer {secret}"
    r = rest.client.post("/v1/jobs", headers=headers, content=body())
    assert r.status_code == 401
    assert "Authorization: Bearer" in r.json()["errors"][0]
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert consumed == []
    assert rest.calls("submit_job") == []


def test_wrong_scheme_is_401(rest):
    r = rest.client.post("/v1/jobs", headers={"Authorization": f"Basic {rest.secret}"},
                         data={"request": _request()})
    assert r.status_code == 401


def test_submission_is_disabled_without_a_cluster_secret(make_rest):
    h = make_rest(secret=None)
    r = _submit(h, secret="anything")
    assert r.status_code == 401
    assert "security.cluster.secret" in r.json()["errors"][0]
    assert h.calls("submit_job") == []


def test_version_mismatch_is_400_naming_both_versions(rest):
    mine = server_versions()
    r = _submit(rest, request=_request({**mine, "python": "3.99.0"}))
    assert r.status_code == 400
    (message,) = r.json()["errors"]
    assert "3.99.0" in message and mine["python"] in message
    r = _submit(rest, request=_request({**mine, "pyspark": "3.5.0"}))
    assert r.status_code == 400
    assert "3.5.0" in r.json()["errors"][0] and mine["pyspark"] in r.json()["errors"][0]
    assert rest.calls("submit_job") == []


@pytest.mark.parametrize("request_json", [
    "not json", "[]", json.dumps({"client": server_versions()}),
    json.dumps({"jobGraphFileName": "job.graph"}),
])
def test_malformed_request_field_is_400_with_the_format(rest, request_json):
    r = _submit(rest, request=request_json)
    assert r.status_code == 400
    assert "request" in r.json()["errors"][0]


def test_missing_file_part_is_400(rest):
    r = _submit(rest, request=_request(file_name="other.graph"))
    assert r.status_code == 400
    assert "other.graph" in r.json()["errors"][0]


def test_not_multipart_is_400(rest):
    r = rest.client.post("/v1/jobs", headers={"Authorization": f"Bearer {rest.secret}"},
                         json={"jobGraphFileName": "job.graph"})
    assert r.status_code == 400
    assert "multipart/form-data" in r.json()["errors"][0]


def test_refused_pickle_is_400(rest):
    r = _submit(rest, data=pickle.dumps(_Evil()))
    assert r.status_code == 400
    assert "posix.system" in r.json()["errors"][0] or "os.system" in r.json()["errors"][0]
    assert rest.calls("submit_job") == []


def test_duplicate_submission_is_409(rest):
    def duplicate(job_graph):
        raise DuplicateJobSubmissionException(f"Job {job_graph.job_id} has already been submitted.")

    rest.on("submit_job", duplicate)
    r = _submit(rest)
    assert r.status_code == 409
    assert "already been submitted" in r.json()["errors"][0]


def test_refused_submission_is_400(rest):
    def refuse(job_graph):
        raise JobSubmissionException("no vertices")

    rest.on("submit_job", refuse)
    r = _submit(rest)
    assert r.status_code == 400
    assert r.json() == {"errors": ["no vertices"]}


def test_oversized_body_is_413_from_content_length(make_rest):
    h = make_rest({"rest.server.max-content-length": "1k"})
    r = _submit(h, data=b"x" * 4096)
    assert r.status_code == 413
    assert "rest.server.max-content-length" in r.json()["errors"][0]
    assert h.calls("submit_job") == []


def test_oversized_body_is_413_while_streaming(make_rest):
    h = make_rest({"rest.server.max-content-length": "1k"})
    sent = []

    def body():
        for _ in range(100):
            sent.append(1)
            yield b"y" * 100

    r = h.client.post("/v1/jobs", content=body(), headers={
        "Authorization": f"Bearer {h.secret}",
        "Content-Type": "multipart/form-data; boundary=x",
    })
    assert r.status_code == 413
    assert "rest.server.max-content-length" in r.json()["errors"][0]
