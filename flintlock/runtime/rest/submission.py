"""Job submission over REST: the JobGraph codec and flintlock's ``POST /jobs`` format.

Flink's ``POST /jobs`` sends a Java-serialized JobGraph, which a Python server cannot read, so
flintlock keeps Flink's envelope and replaces the payload:

``POST /v1/jobs`` (or ``/jobs``), ``Content-Type: multipart/form-data``, header
``Authorization: Bearer <security.cluster.secret>``, with two parts:

- a form field ``request`` holding JSON::

      {"jobGraphFileName": "job.graph",
       "client": {"python": "3.11.7", "pyspark": "4.3.0", "flintlock": "0.1.0"}}

  (``executionPlanFileName`` is accepted as Flink's newer name for ``jobGraphFileName``);
- a file part whose filename (or field name) is that file name, holding
  ``serialize_job_graph(job_graph)``: a pickle of the ``JobGraph`` dataclass.

Answers: 202 ``{"jobUrl": "/jobs/<jobid>"}``; 401 without the right secret (checked before the
body is read, so nothing from an unauthenticated peer is ever unpickled); 413 when the body is
larger than ``rest.server.max-content-length``; 400 when the request is malformed or the client's
Python ``major.minor`` or pyspark version differs from the cluster's; 409 for a job id that
is already running or finished. Errors are Flink's ``{"errors": ["..."]}``.

``deserialize_job_graph`` unpickles with a restricted ``Unpickler``: only classes defined in
``flintlock`` modules, a few safe builtins and ``collections`` containers may be loaded, and no
flintlock constructor runs: objects are allocated with ``object.__new__`` and get their fields
set, and the only callables a pickle may call are safe builtins, containers and enum lookups. The
invokable payloads inside (cloudpickled user functions) stay opaque bytes; they are unpickled
only inside Task threads on the TaskManagers.
"""

from __future__ import annotations

import enum
import importlib.metadata
import io
import pickle
import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from flintlock.runtime.jobgraph.job_graph import JobGraph

__all__ = [
    "JOB_GRAPH_FILE_NAME",
    "JobGraphDecodeError",
    "SubmissionRequest",
    "check_client_versions",
    "deserialize_job_graph",
    "parse_submission_request",
    "serialize_job_graph",
    "server_versions",
]

#: The file name clients give the serialized JobGraph part.
JOB_GRAPH_FILE_NAME = "job.graph"

_PICKLE_PROTOCOL = 5

_SAFE_BUILTINS = frozenset({
    "bool", "bytearray", "bytes", "complex", "dict", "float", "frozenset", "int", "list",
    "range", "set", "slice", "str", "tuple",
})
_SAFE_COLLECTIONS = frozenset({"Counter", "OrderedDict", "defaultdict", "deque"})


class JobGraphDecodeError(ValueError):
    """The submitted bytes are not a JobGraph this server may load (the message says why)."""


def serialize_job_graph(job_graph: JobGraph) -> bytes:
    """Pickle ``job_graph`` for ``POST /jobs``."""
    if not isinstance(job_graph, JobGraph):
        raise TypeError(f"expected a JobGraph, got {type(job_graph).__name__}")
    return pickle.dumps(job_graph, protocol=_PICKLE_PROTOCOL)


def _is_flintlock_class(obj: Any) -> bool:
    """A class defined in flintlock (not a re-export of another library's callable, such as
    ``os.system`` imported into a flintlock module)."""
    return isinstance(obj, type) and (obj.__module__ or "").split(".")[0] == "flintlock"


def _may_call(func: Any) -> bool:
    """Callables a submitted pickle may call (REDUCE): safe builtins, collections containers and
    enum lookups (``JobType("BATCH")``). No other constructor runs while decoding: ordinary
    objects are created with ``cls.__new__`` and their state set without ``__init__``."""
    if isinstance(func, type) and issubclass(func, enum.Enum):
        return True
    return (getattr(func, "__module__", None) in ("builtins", "collections")
            and getattr(func, "__name__", None) in _SAFE_BUILTINS | _SAFE_COLLECTIONS)


class _RestrictedUnpickler(pickle._Unpickler):  # the Python unpickler: its opcodes can be checked
    """Loads flintlock classes, safe builtins and collections containers, without running any
    flintlock constructor (``LogDirectory(path)`` would create a directory)."""

    # typeshed leaves out _Unpickler's undocumented ``stack`` and ``load_*`` opcode methods, and
    # types ``dispatch`` with the C ``Unpickler`` as argument
    stack: list[Any]
    dispatch: ClassVar[dict[int, Callable[[Any], None]]] = dict(pickle._Unpickler.dispatch)

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _SAFE_BUILTINS:
            return super().find_class(module, name)
        if module == "collections" and name in _SAFE_COLLECTIONS:
            return super().find_class(module, name)
        parts = module.split(".")
        if (
            parts[0] == "flintlock"
            and "__main__" not in parts
            and name.isidentifier()
            and not name.startswith("__")
        ):
            obj = super().find_class(module, name)
            if _is_flintlock_class(obj):
                return obj
        raise JobGraphDecodeError(
            f"a submitted JobGraph may only contain flintlock classes, builtin values and "
            f"collections containers; it references {module}.{name}"
        )

    def _refuse_call(self, func: Any) -> None:
        name = getattr(func, "__qualname__", type(func).__name__)
        raise JobGraphDecodeError(
            f"a submitted JobGraph may not call {getattr(func, '__module__', '?')}.{name} while "
            "it is decoded; flintlock objects are restored from their fields only")

    def load_reduce(self) -> None:
        func = self.stack[-2]
        if not _may_call(func):
            self._refuse_call(func)
        super().load_reduce()  # type: ignore[misc]  # not in typeshed (undocumented)

    def load_newobj(self) -> None:
        self._check_new(self.stack[-2])
        super().load_newobj()  # type: ignore[misc]  # not in typeshed (undocumented)

    def load_newobj_ex(self) -> None:
        self._check_new(self.stack[-3])
        super().load_newobj_ex()  # type: ignore[misc]  # not in typeshed (undocumented)

    def _check_new(self, cls: Any) -> None:
        # object.__new__ (or a builtin's) only allocates; a class's own __new__ could do anything
        if not isinstance(cls, type) or not (cls.__new__ is object.__new__ or _may_call(cls)
                                             or issubclass(cls, enum.Enum)):
            self._refuse_call(cls)

    def load_inst(self) -> None:  # protocol 0/1 INST and OBJ call a class: never allowed
        raise JobGraphDecodeError("a submitted JobGraph may not use the INST or OBJ pickle "
                                  "opcodes; write it with serialize_job_graph")

    load_obj = load_inst

    dispatch[pickle.REDUCE[0]] = load_reduce
    dispatch[pickle.NEWOBJ[0]] = load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex
    dispatch[pickle.INST[0]] = load_inst
    dispatch[pickle.OBJ[0]] = load_obj


def deserialize_job_graph(data: bytes) -> JobGraph:
    """Unpickle a JobGraph written by ``serialize_job_graph``.

    Raises:
        JobGraphDecodeError: the bytes are not a pickle, reference a class outside the allowed
            set, or hold something other than a JobGraph.
    """
    try:
        obj = _RestrictedUnpickler(io.BytesIO(data)).load()
    except JobGraphDecodeError:
        raise
    except Exception as exc:  # any malformed pickle: truncated, bad opcode, bad constructor args
        raise JobGraphDecodeError(
            f"the job graph file could not be read ({type(exc).__name__}: {exc})"
        ) from None
    if not isinstance(obj, JobGraph):
        raise JobGraphDecodeError(
            f"the job graph file holds a {type(obj).__name__}, not a JobGraph"
        )
    return obj


# ---- request envelope and version check -------------------------------------------------------


@dataclass(frozen=True)
class SubmissionRequest:
    """The parsed ``request`` form field of ``POST /jobs``."""

    job_graph_file_name: str
    client_versions: Mapping[str, str]


_FORMAT_HINT = (
    'expected multipart/form-data with a field "request" = {"jobGraphFileName": "job.graph", '
    '"client": {"python": "3.11.7", "pyspark": "4.3.0", "flintlock": "0.1.0"}} and a file part '
    '"job.graph" holding flintlock.runtime.rest.submission.serialize_job_graph(job_graph)'
)


def parse_submission_request(payload: Any) -> SubmissionRequest:
    """Validate the decoded JSON of the ``request`` field; ``ValueError`` says what is wrong."""
    if not isinstance(payload, dict):
        raise ValueError(f'the "request" field must be a JSON object; {_FORMAT_HINT}')
    file_name = payload.get("jobGraphFileName", payload.get("executionPlanFileName"))
    if not isinstance(file_name, str) or not file_name:
        raise ValueError(f'the "request" field has no "jobGraphFileName"; {_FORMAT_HINT}')
    client = payload.get("client")
    if not isinstance(client, dict) or not all(
        isinstance(client.get(k), str) for k in ("python", "pyspark")
    ):
        raise ValueError(
            'the "request" field has no "client" object with "python" and "pyspark" versions; '
            f"{_FORMAT_HINT}"
        )
    return SubmissionRequest(file_name, {str(k): str(v) for k, v in client.items()})


def server_versions() -> dict[str, str]:
    """This process's Python, pyspark and flintlock versions (pyspark is not imported)."""
    versions = {"python": platform.python_version()}
    for dist in ("pyspark", "flintlock"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "unknown"
    return versions


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def check_client_versions(client: Mapping[str, str], server: Mapping[str, str] | None = None) -> None:
    """Raise ``ValueError`` naming both versions when Python major.minor or pyspark differ.

    User functions are cloudpickled by the client and unpickled by the TaskManagers, which needs
    the same Python minor version and the same pyspark on both sides.
    """
    server = dict(server) if server is not None else server_versions()
    problems = []
    c_py, s_py = client.get("python", "?"), server.get("python", "?")
    if _major_minor(c_py) != _major_minor(s_py):
        problems.append(
            f"the client runs Python {c_py} but the cluster runs Python {s_py} "
            f"(major.minor must match: {_major_minor(c_py)} != {_major_minor(s_py)})"
        )
    c_ps, s_ps = client.get("pyspark", "?"), server.get("pyspark", "?")
    if c_ps != s_ps:
        problems.append(f"the client has pyspark {c_ps} but the cluster has pyspark {s_ps}")
    if problems:
        raise ValueError(
            "Job rejected: " + "; ".join(problems)
            + ". Submit from an environment with the cluster's versions."
        )

