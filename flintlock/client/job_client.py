"""JobClient and JobExecutionResult: what ``env.execute()`` / ``execute_async()`` give a program.

Follows Flink ``core/execution/JobClient`` and ``api/common/JobExecutionResult``. A failed job raises
``JobExecutionException`` whose message carries the root cause: exception type and message, the
failing task (``"<vertex> (i/n)#attempt"``), its TaskManager, and the Python/Spark error text.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from flintlock.exceptions import FlintlockException
from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph, JobResult
from flintlock.runtime.ids import JobID
from flintlock.runtime.jobgraph.types import JobStatus

__all__ = [
    "JobClient",
    "JobExecutionException",
    "JobExecutionResult",
    "PollingJobClient",
    "SavepointException",
    "job_result_to_execution_result",
    "wait_for_savepoint",
]

log = logging.getLogger(__name__)


class JobExecutionException(FlintlockException):
    """The job did not finish successfully.

    Attributes:
        job_id: the job.
        status: ``"FAILED"`` or ``"CANCELED"``.
        result: the JobResult (``failure`` holds the root cause when FAILED).
    """

    def __init__(self, result: JobResult) -> None:
        self.job_id = result.job_id
        self.status = result.application_status
        self.result = result
        super().__init__(describe_failure(result))


def describe_failure(result: JobResult) -> str:
    """A readable account of why a job did not succeed (root cause first, then where)."""
    head = f"Job {result.job_id} ({result.job_name!r}) {result.application_status}"
    failure = result.failure
    if result.application_status == "CANCELED" or failure is None:
        return head + "."
    lines = [f"{head}: {failure.error.class_name}: {failure.error.message}"]
    if failure.task_name:
        where = f"  in task {failure.task_name}"
        if failure.location:
            where += f" on TaskManager {failure.location}"
        lines.append(where)
    if failure.error.traceback:
        lines.append("Root cause traceback:")
        lines.append(failure.error.traceback.rstrip())
    return "\n".join(lines)


@dataclass(frozen=True)
class JobExecutionResult:
    """The result of a finished job.

    Attributes:
        job_id: the JobID.
        net_runtime_ms: time from submission to FINISHED, in milliseconds.
        accumulators: accumulator name -> value (bytes for collect sinks).
    """

    job_id: JobID
    net_runtime_ms: int
    accumulators: Mapping[str, Any] = field(default_factory=dict)
    job_name: str = ""

    def get_job_id(self) -> JobID:
        return self.job_id

    def get_net_runtime(self) -> int:
        """Milliseconds, as Flink's ``getNetRuntime()``."""
        return self.net_runtime_ms

    def get_accumulator_result(self, name: str) -> Any:
        return self.accumulators.get(name)

    def get_all_accumulator_results(self) -> Mapping[str, Any]:
        return dict(self.accumulators)


def job_result_to_execution_result(result: JobResult) -> JobExecutionResult:
    """The JobExecutionResult of a SUCCEEDED job; raises JobExecutionException otherwise."""
    if not result.is_success:
        raise JobExecutionException(result)
    return JobExecutionResult(
        result.job_id, result.net_runtime_ms, dict(result.accumulator_results), result.job_name
    )


class JobClient(Protocol):
    """Handle on a submitted job."""

    @property
    def job_id(self) -> JobID: ...

    def get_job_status(self) -> JobStatus: ...

    def get_job_details(self) -> ArchivedExecutionGraph: ...

    def cancel(self) -> None:
        """Request cancellation; returns once the cluster acknowledged it."""
        ...

    def send_coordination_request(self, operator_id: str, request: dict[str, Any]) -> dict[str, Any]:
        """Ask the coordinator of operator ``operator_id`` (Flink ``CoordinationRequestGateway``;
        flintlock has one: a STREAMING job's collect sink, see ``collect_coordinator``)."""
        ...

    def trigger_savepoint(self, target_directory: str | None = None, cancel_job: bool = False,
                          timeout_s: float = 600.0) -> str:
        """Take a savepoint (into ``target_directory``, else ``state.savepoints.dir``) and return
        its path; ``cancel_job`` cancels the job after it (Flink ``JobClient.triggerSavepoint``).

        Raises:
            SavepointException: it failed (the message says why). TimeoutError: not done in time.
        """
        ...

    def stop_with_savepoint(self, target_directory: str | None = None, drain: bool = False,
                            timeout_s: float = 600.0) -> str:
        """Stop the job with a savepoint (Flink ``JobClient.stopWithSavepoint``, ``flintlock
        stop``): the job FINISHES after it, with ``drain`` after MAX_WATERMARK; returns its
        path once it completed.

        Raises:
            SavepointException: it failed (the job goes on). TimeoutError: not done in time.
        """
        ...

    def get_job_execution_result(self, timeout_s: float | None = None) -> JobExecutionResult:
        """Wait for the job to end.

        Raises:
            JobExecutionException: the job failed or was cancelled (message has the root cause).
            TimeoutError: still running after ``timeout_s``.
        """
        ...


class SavepointException(FlintlockException):
    """A savepoint failed (the message has the cause)."""


def wait_for_savepoint(status: Callable[[], Mapping[str, Any]], timeout_s: float) -> str:
    """Poll a savepoint operation (``Dispatcher.savepoint_status`` / REST
    ``GET /jobs/:jobid/savepoints/:triggerid``) until it is done; returns its path.

    Raises:
        SavepointException: it failed. TimeoutError: still in progress after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        answer = status()
        if (answer.get("status") or {}).get("id") == "COMPLETED":
            operation = answer.get("operation") or {}
            if "location" in operation:
                return str(operation["location"])
            cause = operation.get("failure-cause") or {}
            raise SavepointException(str(cause.get("stack-trace") or cause or "savepoint failed"))
        if time.monotonic() > deadline:
            raise TimeoutError(f"the savepoint is still in progress after {timeout_s:g} s")
        time.sleep(0.1)


#: how often a waiting client without progress bars looks for failures and restarts (seconds; a
#: look fetches the whole job from its JobMaster)
_REPORT_INTERVAL_S = 1.0
#: how long one result request waits on the JobManager for the result (a blocking query, s):
#: the answer comes as the job ends. Polls that backed off from 5 ms to 100 ms answered up to
#: one interval late (TPC-H Q6's client waited ~60 ms past the job's end); one request per
#: 0.5 s also costs a busy JobManager fewer wake-ups than 50 clients polling 10 times a second.
_RESULT_WAIT_S = 0.5


class PollingJobClient:
    """The waiting and reporting shared by the MiniCluster and REST JobClients.

    Subclasses answer ``_result(wait_s)`` (the JobResult once terminal, else ``None``, waiting
    up to ``wait_s`` on the Dispatcher for it), ``get_job_details()`` and ``cancel()``; this
    class waits (with rich progress bars when ``show_progress``),
    prints each failure and restart as it happens (``flintlock.client.job_events``; above the bars,
    or as plain stderr lines without them), prints the job's end line to stderr and turns
    failures into ``JobExecutionException``.
    """

    def __init__(self, job_id: JobID, job_name: str, show_progress: bool) -> None:
        self._job_id = job_id
        self._job_name = job_name
        self._show_progress = show_progress

    def _now_ms(self) -> int:
        """The clock the job's timestamps are compared with (epoch ms)."""
        return int(time.time() * 1000)

    @property
    def job_id(self) -> JobID:
        return self._job_id

    def _result(self, wait_s: float = 0.0) -> JobResult | None:
        raise NotImplementedError

    def get_job_details(self) -> ArchivedExecutionGraph:
        raise NotImplementedError

    def cancel(self) -> None:
        raise NotImplementedError

    def get_job_result(self, timeout_s: float | None = None) -> JobResult:
        """Wait for the JobResult (any terminal status), showing progress when enabled.

        Raises:
            TimeoutError: the job is still running after ``timeout_s``.
        """
        from flintlock.client.job_events import FailoverReporter
        from flintlock.client.progress import follow_job, print_lines, stderr_console

        holder: list[JobResult] = []

        def done(wait_s: float = 0.0) -> bool:
            if not holder:
                result = self._result(wait_s)
                if result is not None:
                    holder.append(result)
            return bool(holder)

        reporter = FailoverReporter()
        console = stderr_console()

        def report(graph: ArchivedExecutionGraph) -> list[str]:
            return reporter.update(graph, self._now_ms())

        def look() -> None:
            """Print what is new; the result is what matters, so the report is best effort."""
            try:
                graph = self.get_job_details()
            except Exception as exc:
                log.debug("job %s: no snapshot for the failure report: %s", self._job_id, exc)
                return
            print_lines(console, report(graph))

        if self._show_progress:
            try:
                follow_job(self.get_job_details, done, console, report=report)
            except KeyboardInterrupt:
                if not self._confirm_cancel(console):
                    raise
                follow_job(self.get_job_details, done, console, report=report)
            return holder[0]
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        next_look = time.monotonic() + _REPORT_INTERVAL_S
        wait_s = 0.0  # the first ask is answered at once (a job that already ended)
        while not done(wait_s):
            now = time.monotonic()
            if deadline is not None and now > deadline:
                raise TimeoutError(f"job {self._job_id} not finished after {timeout_s} s")
            if now >= next_look:
                look()
                next_look = now + _REPORT_INTERVAL_S
            wait_s = max(0.005, min(_RESULT_WAIT_S, next_look - time.monotonic(),
                                    _RESULT_WAIT_S if deadline is None
                                    else deadline - time.monotonic()))
        look()  # failures and restarts since the last look (the end line follows)
        return holder[0]

    def _confirm_cancel(self, console: Any) -> bool:
        """Ctrl-C while following a job: ask whether to cancel it (interactive terminals only).

        Returns True when the job was cancelled (the caller follows it to its end); False when
        the user keeps it running (the client stops following; the job runs on)."""
        import sys

        from rich.prompt import Confirm

        if not sys.stdin.isatty() or not console.is_terminal:
            return False
        try:
            cancel = Confirm.ask(f"\nCancel job {self._job_id}?", default=True, console=console)
        except (KeyboardInterrupt, EOFError):
            cancel = False
        if not cancel:
            console.print(f"Job {self._job_id} keeps running; stop it with: flintlock cancel "
                          f"{self._job_id}")
            return False
        self.cancel()
        console.print(f"Cancelling job {self._job_id} ...")
        return True

    def get_job_execution_result(self, timeout_s: float | None = None) -> JobExecutionResult:
        from flintlock.client.progress import stderr_console

        result = self.get_job_result(timeout_s)
        if result.is_success:
            stderr_console().print(
                f"Job {result.job_id} ({result.job_name or self._job_name}) FINISHED in "
                f"{result.net_runtime_ms} ms"
            )
        else:
            stderr_console().print(describe_failure(result).splitlines()[0])
        return job_result_to_execution_result(result)
