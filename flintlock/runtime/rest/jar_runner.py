"""``POST /jars/:jarid/run``: run an uploaded program's main against this cluster.

Flink runs the jar's main inside the JobManager in detached mode and answers with the first
JobID. flintlock runs ``flintlock run -m <this REST server> -d [-p N] [-D k=v ...] <program>
<args>`` in a subprocess (the program's main must not run inside the JobManager's event loop,
and a crash of user code must not take the JobManager down). The cluster secret reaches the
subprocess through the ``FLINTLOCK_CLUSTER_SECRET`` environment variable, never its command
line. The program's jobs are submitted over REST, so they appear in ``/jobs/overview`` like any
other; the handler answers with the first JobID the program printed.

Request (Flink ``JarRunRequestBody``): ``programArgsList`` (list) or ``programArgs`` (one string,
split like a shell), ``parallelism``, ``flinkConfiguration`` (passed as ``-D``); query parameters
``programArg`` (comma-separated) and ``parallelism`` as Flink's deprecated forms. ``entryClass``,
``jobId``, ``savepointPath``, ``allowNonRestoredState`` and ``restoreMode``/``claimMode`` are
accepted and ignored (a Python program has no entry class; flintlock has no savepoints).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flintlock.exceptions import FlintlockException
from flintlock.runtime.entrypoint.common import SECRET_ENV
from flintlock.runtime.ids import JobID

__all__ = ["JarRunException", "JarRunRequest", "parse_run_request", "run_program"]

_JOB_ID = re.compile(r"JobID ([0-9a-f]{32})")
_KEY = re.compile(r"^[A-Za-z0-9_$][A-Za-z0-9_.$-]{0,199}$")
_MAX_ARGS = 1000
_MAX_ARG_CHARS = 10_000
_OUTPUT_TAIL = 4000


class JarRunException(FlintlockException):
    """The program could not be run or submitted no job; the message carries its output."""


@dataclass(frozen=True)
class JarRunRequest:
    """What to run: program arguments, parallelism (``-p``) and ``-D`` settings."""

    program_args: tuple[str, ...] = ()
    parallelism: int | None = None
    configuration: dict[str, str] = field(default_factory=dict)


def _args(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise ValueError(f"{what} must be a list of strings")
    return list(value)


def parse_run_request(body: Any, program_arg: str | None = None,
                      parallelism: int | None = None) -> JarRunRequest:
    """Validate a ``JarRunRequestBody`` (``body`` may be ``None``) plus the query parameters.

    Raises:
        ValueError: a field has the wrong type or an out-of-range value (the message names it).
    """
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise ValueError("the request body must be a JSON object (JarRunRequestBody)")
    if body.get("programArgsList") is not None:
        args = _args(body["programArgsList"], "programArgsList")
    elif body.get("programArgs") is not None:
        if not isinstance(body["programArgs"], str):
            raise ValueError("programArgs must be a string")
        try:
            args = shlex.split(body["programArgs"])
        except ValueError as exc:
            raise ValueError(f"programArgs cannot be split into arguments: {exc}") from None
    elif program_arg:
        args = [a for a in program_arg.split(",") if a]
    else:
        args = []
    if len(args) > _MAX_ARGS or any(len(a) > _MAX_ARG_CHARS for a in args):
        raise ValueError(f"at most {_MAX_ARGS} program arguments of at most {_MAX_ARG_CHARS} "
                         "characters each")
    p = body.get("parallelism", parallelism)
    if p is not None and (isinstance(p, bool) or not isinstance(p, int) or p < 1 or p > 32768):
        raise ValueError(f"parallelism must be an integer between 1 and 32768, not {p!r}")
    conf = body.get("flinkConfiguration") or {}
    if not isinstance(conf, dict) or len(conf) > _MAX_ARGS:
        raise ValueError("flinkConfiguration must be an object of at most 1000 key/value strings")
    settings: dict[str, str] = {}
    for key, value in conf.items():
        if not isinstance(key, str) or not _KEY.match(key):
            raise ValueError(f"invalid configuration key {str(key)[:100]!r} in flinkConfiguration")
        if key == "security.cluster.secret":
            raise ValueError("flinkConfiguration cannot set security.cluster.secret")
        if not isinstance(value, (str, int, float, bool)) or len(str(value)) > _MAX_ARG_CHARS:
            raise ValueError(f"flinkConfiguration[{key!r}] must be a string")
        settings[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return JarRunRequest(tuple(args), p, settings)


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace").strip()
    return text if len(text) <= _OUTPUT_TAIL else "..." + text[-_OUTPUT_TAIL:]


async def run_program(program: Path, request: JarRunRequest, rest_address: str,
                      secret: str | None, timeout_s: float,
                      client_settings: Mapping[str, str] | None = None) -> JobID:
    """Run ``program`` detached against the cluster at ``rest_address`` (``host:port``).

    ``client_settings`` are configuration keys the client needs to reach the REST endpoint
    (``ssl_utils.rest_client_settings``); the request's own settings come after them.

    Returns the first JobID the program submitted. The program's main gets ``timeout_s``
    seconds to return; a program still running then is stopped (its submitted jobs go on).

    Raises:
        JarRunException: the program submitted no job (with its exit code and output).
    """
    argv = [sys.executable, "-m", "flintlock", "run", "-m", rest_address, "-d"]
    if request.parallelism is not None:
        argv += ["-p", str(request.parallelism)]
    for key, value in [*(client_settings or {}).items(), *request.configuration.items()]:
        argv += ["-D", f"{key}={value}"]
    argv += [str(program), *request.program_args]
    env = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    if secret is not None:
        env[SECRET_ENV] = secret
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True,
    )
    timed_out = False
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout_s)
    except asyncio.TimeoutError:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        stdout, stderr = await proc.communicate()
    except BaseException:  # the request was cancelled: do not leave the program behind
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    found = _JOB_ID.search(stderr.decode("utf-8", errors="replace")) or _JOB_ID.search(
        stdout.decode("utf-8", errors="replace"))
    if found:
        return JobID(found.group(1))
    why = (f"did not submit a job within {timeout_s:.0f} s" if timed_out
           else f"exited with code {proc.returncode} without submitting a job")
    output = _tail(stderr) or _tail(stdout) or "(no output)"
    raise JarRunException(f"The program {program.name.split('_', 1)[-1]!r} {why}:\n{output}")
