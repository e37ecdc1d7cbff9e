"""Running a user program's ``main`` in this process (Flink ``PackagedProgram``).

The program file runs as ``__main__`` with ``sys.argv = [program, *args]``, its directory first on
``sys.path`` and the working directory after it (so it can import its own modules and packages), inside a ``ClientContext`` that carries the
command line's settings to every ``execute()``.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

from flintlock.client.context import ClientContext, ProgramPlanCaptured, client_context
from flintlock.exceptions import FlintlockException

__all__ = ["ProgramInvocationException", "ProgramMissingJobException", "run_program"]


class ProgramInvocationException(FlintlockException):
    """The program could not be run, or its main raised."""


class ProgramMissingJobException(FlintlockException):
    """The program ended without calling ``execute()``."""


def run_program(path: str, args: list[str], context: ClientContext) -> ClientContext:
    """Run the program's main under ``context``; return the context (with submitted/captured jobs).

    Raises:
        ProgramInvocationException: the file is missing or unreadable.
        ProgramMissingJobException: main returned without any ``execute()``.
        BaseException: whatever the program's main raised (re-raised unchanged).
    """
    program = Path(path)
    if not program.is_file():
        raise ProgramInvocationException(f"Program file {path!r} does not exist or is not a file.")
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [str(program), *args]
    sys.path.insert(0, str(program.resolve().parent))
    if os.getcwd() not in sys.path:  # like ``python -m``: the working directory's packages
        sys.path.insert(1, os.getcwd())
    try:
        with client_context(context):
            try:
                runpy.run_path(str(program), run_name="__main__")
            except ProgramPlanCaptured:
                pass
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    raise
    finally:
        sys.argv = old_argv
        sys.path[:] = old_path
    jobs = context.capture_plans if context.capture_plans is not None else context.submitted
    if not jobs:
        raise ProgramMissingJobException(
            f"The program {path!r} did not call execute(): it defines no job to run. "
            "Call env.execute(), execute_async() or execute_and_collect() in its main."
        )
    return context
