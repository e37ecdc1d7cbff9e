"""Application mode's bootstrap: main() runs against the cluster's own Dispatcher, and the
application's status follows main() and its jobs (a recording Dispatcher, no Spark)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from flintlock.client.application import (
    ApplicationResult,
    ApplicationSpec,
    ApplicationStatus,
    run_application,
    stable_job_id,
)
from flintlock.config import Configuration
from flintlock.runtime.dispatcher.exceptions import DuplicateJobSubmissionException
from flintlock.runtime.executiongraph.archived import JobResult
from flintlock.runtime.highavailability.application_status_store import (
    ApplicationStatusException,
    ApplicationStatusStore,
    RecordedApplicationStatus,
)
from flintlock.runtime.ids import JobID
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import JobStatus

#: argv: <outcome of each job ...>; runs one job per argument, attached unless it says "async"
PROGRAM = """
import sys
from flintlock import StreamExecutionEnvironment
from flintlock.client.context import current_context

env = StreamExecutionEnvironment.get_execution_environment()
print("target", env.get_configuration().get_raw("execution.target"))
for i, outcome in enumerate(sys.argv[1:]):
    env.from_sequence(1, 10).print()
    if outcome.startswith("async"):
        env.execute_async(f"job-{i}-{outcome}")
    else:
        env.execute(f"job-{i}-{outcome}")
if "raise" in sys.argv[1:]:
    raise RuntimeError("main() gave up")
"""


@dataclass
class RecordingDispatcher:
    """Answers each job's result as its name says (``job-<i>-<SUCCEEDED|FAILED|CANCELED>``);
    ``async`` jobs end only when ``release`` is set."""

    submitted: list[JobGraph] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def submit_job(self, job_graph: JobGraph) -> None:
        self.submitted.append(job_graph)

    async def request_job_result(self, job_id: JobID, timeout_s: float = 0.0) -> JobResult | None:
        graph = next(g for g in self.submitted if g.job_id == job_id)
        outcome = graph.name.split("-", 2)[2]
        if outcome.startswith("async") and not self.release.is_set():
            return None
        status = outcome.removeprefix("async").lstrip("-") or "SUCCEEDED"
        return JobResult(job_id, graph.name, "SUCCEEDED" if status == "raise" else status, 5)

    async def request_job_status(self, job_id: JobID) -> JobStatus:
        result = await self.request_job_result(job_id)
        return JobStatus.RUNNING if result is None else JobStatus.FINISHED

    async def request_job(self, job_id: JobID) -> Any:
        raise NotImplementedError


def _run(tmp_path: Path, *outcomes: str, dispatcher: RecordingDispatcher | None = None,
         stop: asyncio.Event | None = None) -> tuple[ApplicationResult | None, RecordingDispatcher]:
    program = tmp_path / "app.py"
    program.write_text(PROGRAM)

    async def main() -> ApplicationResult | None:
        nonlocal dispatcher
        dispatcher = dispatcher or RecordingDispatcher()
        return await run_application(ApplicationSpec(str(program), outcomes), dispatcher,
                                     Configuration(), stop or asyncio.Event(), 0.01)

    result = asyncio.run(asyncio.wait_for(main(), 60))
    assert dispatcher is not None
    return result, dispatcher


def test_an_application_whose_jobs_all_finish_succeeds(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    result, dispatcher = _run(tmp_path, "SUCCEEDED", "SUCCEEDED", "SUCCEEDED")
    assert result is not None and result.status is ApplicationStatus.SUCCEEDED
    assert result.status.exit_code == 0 and result.diagnostics == ""
    assert [g.name for g in dispatcher.submitted] == [f"job-{i}-SUCCEEDED" for i in range(3)]
    assert list(result.jobs.values()) == ["SUCCEEDED"] * 3
    assert "target embedded" in capsys.readouterr().out  # every execute() is submitted here


def test_jobs_submitted_with_execute_async_are_awaited(tmp_path: Path) -> None:
    async def release_later(dispatcher: RecordingDispatcher) -> None:
        await asyncio.sleep(0.3)
        dispatcher.release.set()

    async def main() -> ApplicationResult | None:
        dispatcher = RecordingDispatcher()
        program = tmp_path / "app.py"
        program.write_text(PROGRAM)
        releaser = asyncio.create_task(release_later(dispatcher))
        result = await run_application(ApplicationSpec(str(program), ("async",)), dispatcher,
                                       Configuration(), asyncio.Event(), 0.01)
        assert dispatcher.release.is_set()  # it waited for the job main() did not wait for
        await releaser
        return result

    result = asyncio.run(asyncio.wait_for(main(), 60))
    assert result is not None and result.status is ApplicationStatus.SUCCEEDED


@pytest.mark.parametrize(("outcomes", "status"), [
    (("SUCCEEDED", "FAILED"), ApplicationStatus.FAILED),
    (("CANCELED",), ApplicationStatus.CANCELED),
    (("SUCCEEDED", "raise"), ApplicationStatus.FAILED),
])
def test_a_failed_job_a_cancelled_job_or_a_raising_main_decide_the_status(
        tmp_path: Path, outcomes: tuple[str, ...], status: ApplicationStatus) -> None:
    result, _ = _run(tmp_path, *outcomes)
    assert result is not None and result.status is status
    assert result.status.exit_code == {"FAILED": 1, "CANCELED": 2}[status.name]
    if "raise" in outcomes:
        assert "RuntimeError: main() gave up" in result.diagnostics


def test_a_cancelled_job_cancels_the_jobs_still_running(tmp_path: Path) -> None:
    cancelled: list[str] = []

    class Dispatcher(RecordingDispatcher):
        async def cancel_job(self, job_id: JobID) -> None:
            cancelled.append(next(g.name for g in self.submitted if g.job_id == job_id))
            self.release.set()

    result, _ = _run(tmp_path, "async", "CANCELED", dispatcher=Dispatcher())
    assert cancelled == ["job-0-async"]
    assert result is not None and result.status is ApplicationStatus.CANCELED


def test_a_stopped_job_manager_abandons_the_application(tmp_path: Path) -> None:
    stop = asyncio.Event()
    stop.set()
    result, _ = _run(tmp_path, "async", stop=stop)
    assert result is None


def test_a_detached_application_whose_job_manager_cannot_start_is_an_error(tmp_path: Path) -> None:
    program = tmp_path / "app.py"
    program.write_text(PROGRAM)
    proc = subprocess.run(
        [sys.executable, "-m", "flintlock", "run", "--target", "application", "-d",
         "-D", f"cluster.state-dir={tmp_path / 'state'}",
         "-D", "high-availability.type=ZOOKEEPER", str(program)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "the application ended during start-up (exit code 1)" in proc.stderr
    [app] = (tmp_path / "state" / "applications").iterdir()
    output = (app / "log" / "jobmanager.out").read_text()
    assert "needs high-availability.zookeeper.quorum" in output  # the cause, kept


@dataclass
class KnowingDispatcher(RecordingDispatcher):
    """A Dispatcher that already knows some job ids (an earlier leader submitted them): it
    refuses them as duplicates, as the real one does, and answers their results."""

    known: dict[JobID, str] = field(default_factory=dict)

    async def submit_job(self, job_graph: JobGraph) -> None:
        if job_graph.job_id in self.known:
            raise DuplicateJobSubmissionException(f"Job {job_graph.job_id} has already been submitted.")
        await super().submit_job(job_graph)

    async def request_job_result(self, job_id: JobID, timeout_s: float = 0.0) -> JobResult | None:
        if job_id in self.known:
            return JobResult(job_id, "earlier", self.known[job_id], 5)
        return await super().request_job_result(job_id, timeout_s)


def test_stable_job_ids_depend_on_the_application_and_the_position_only() -> None:
    ids = [stable_job_id("/application-a", i) for i in range(3)]
    assert len(set(ids)) == 3 and ids == [stable_job_id("/application-a", i) for i in range(3)]
    assert stable_job_id("/application-b", 0) != ids[0]
    assert len(str(ids[0])) == 32


def test_with_an_application_id_jobs_get_stable_ids_and_known_ones_are_followed(
        tmp_path: Path) -> None:
    app = "/application-x"
    known = {stable_job_id(app, 0): "SUCCEEDED"}  # finished under an earlier leader
    dispatcher = KnowingDispatcher(known=known)
    program = tmp_path / "app.py"
    program.write_text(PROGRAM)

    async def main() -> ApplicationResult | None:
        return await run_application(ApplicationSpec(str(program), ("SUCCEEDED", "SUCCEEDED")),
                                     dispatcher, Configuration(), asyncio.Event(), 0.01,
                                     application_id=app)

    result = asyncio.run(asyncio.wait_for(main(), 60))
    assert result is not None and result.status is ApplicationStatus.SUCCEEDED
    # job 0 was not submitted again; job 1 was, under its stable id (and plan id)
    assert [(g.job_id, g.plan.get("jid")) for g in dispatcher.submitted] == [
        (stable_job_id(app, 1), str(stable_job_id(app, 1)))]
    assert result.jobs == {str(stable_job_id(app, 0)): "SUCCEEDED",
                           str(stable_job_id(app, 1)): "SUCCEEDED"}


def test_the_application_status_record_is_written_once_and_read_back(tmp_path: Path) -> None:
    store = ApplicationStatusStore(str(tmp_path / "ha" / "application-x"))
    assert store.read() is None
    store.write("FAILED", {"a" * 32: "FAILED"})
    assert store.read() == RecordedApplicationStatus("FAILED", {"a" * 32: "FAILED"})
    assert [p.name for p in (tmp_path / "ha" / "application-x").iterdir()] == [
        "application-status.json"]  # no temporary file left
    with pytest.raises(ValueError, match="unknown application status"):
        store.write("DONE", {})
    (tmp_path / "ha" / "application-x" / "application-status.json").write_text("{not json")
    with pytest.raises(ApplicationStatusException, match="unreadable.*delete it"):
        store.read()


def test_a_new_leader_of_an_ended_application_exits_with_its_status_without_running_it(
        tmp_path: Path) -> None:
    from types import SimpleNamespace

    from flintlock.runtime.entrypoint.job_manager import _lead_application

    ha = SimpleNamespace(directory=str(tmp_path / "ha"), cluster_id="/application-x")
    ApplicationStatusStore(ha.directory).write("CANCELED", {"b" * 32: "CANCELED"})
    program = tmp_path / "app.py"
    program.write_text("raise SystemExit('main() must not run again')")
    dispatcher = RecordingDispatcher()

    async def main() -> tuple[int | None, bool]:
        stop = asyncio.Event()
        code = await _lead_application(ApplicationSpec(str(program)), dispatcher,
                                       Configuration(), stop, ha, asyncio.Event())
        return code, stop.is_set()

    assert asyncio.run(asyncio.wait_for(main(), 30)) == (2, True)
    assert dispatcher.submitted == []
