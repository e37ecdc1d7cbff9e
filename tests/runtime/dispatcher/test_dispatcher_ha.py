"""The Dispatcher with high availability (STYLE layer 2): jobs stored before they start, results
recorded when they end, and a new leader's Dispatcher that runs the unfinished jobs again, lists
the finished ones without running them, and fails only a job whose stored graph is corrupt."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from flintlock.runtime.dispatcher.exceptions import DuplicateJobSubmissionException
from flintlock.runtime.dispatcher.job_persistence import JobPersistence
from flintlock.runtime.highavailability.job_graph_store import FileSystemJobGraphStore
from flintlock.runtime.highavailability.job_result_store import (
    FileSystemJobResultStore,
    JobResultEntry,
)
from flintlock.runtime.highavailability.leader import LeadershipLostException
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.testing.waiting import wait_until
from tests.runtime.dispatcher.test_dispatcher import _job, _setup


def _persistence(root: Path) -> JobPersistence:
    return JobPersistence(FileSystemJobGraphStore(str(root / "graphs")),
                          FileSystemJobResultStore(str(root / "results")))


async def _leader(root: Path, recover: bool) -> tuple[Any, ...]:
    """A Dispatcher as a leader starts it: with the stores, and what it recovered from them."""
    persistence = _persistence(root)
    _, rm, d, gw, masters = await _setup(
        persistence=persistence, recovered=persistence.recover() if recover else None)
    return d, rm, gw, masters


def test_a_new_leader_runs_unfinished_jobs_again_and_lists_finished_ones(tmp_path: Path) -> None:
    async def body() -> None:
        d, rm, gw, masters = await _leader(tmp_path, recover=False)
        done, running, corrupt = _job("done"), _job("running"), _job("corrupt")
        for jg in (done, running, corrupt):
            await gw.submit_job(jg)
        await wait_until(lambda: len(masters) == 3 and all(m.is_running for m in masters))
        masters[0].finish("SUCCEEDED")
        await wait_until(lambda: done.job_id in d._completed)
        graphs = FileSystemJobGraphStore(str(tmp_path / "graphs"))
        assert graphs.job_ids() == sorted([running.job_id, corrupt.job_id], key=str)
        stored = tmp_path / "graphs" / f"submittedJobGraph-{corrupt.job_id}"
        stored.write_bytes(stored.read_bytes()[:30])
        await d.stop()  # the leader is gone; its stores stay
        await rm.stop()

        d, rm, gw, masters = await _leader(tmp_path, recover=True)
        await wait_until(lambda: masters and d._running[running.job_id].gateway is not None)
        assert [m.kwargs["job_graph"] for m in masters] == [running]  # only the unfinished job
        jobs = {j.job_id: j.state for j in await gw.list_jobs()}
        assert jobs == {done.job_id: JobStatus.FINISHED, running.job_id: JobStatus.RUNNING,
                        corrupt.job_id: JobStatus.FAILED}
        result = await gw.request_job_result(corrupt.job_id)
        assert result is not None and "is corrupt" in str(result.failure.error), result
        assert (await gw.request_job_result(done.job_id)).application_status == "SUCCEEDED"
        with pytest.raises(DuplicateJobSubmissionException, match="has already been submitted"):
            await gw.submit_job(done)
        masters[0].finish("CANCELED")
        await wait_until(lambda: running.job_id in d._completed)
        assert (await gw.request_job(running.job_id)).recoveries == 1  # by this leader
        assert (await gw.request_job(done.job_id)).recoveries == 0
        assert graphs.job_ids() == []  # every job ended: nothing left to recover
        await d.stop()
        await rm.stop()

        d, rm, gw, masters = await _leader(tmp_path, recover=True)
        assert masters == []
        assert {j.job_id: j.state for j in await gw.list_jobs()} == {
            done.job_id: JobStatus.FINISHED, running.job_id: JobStatus.CANCELED,
            corrupt.job_id: JobStatus.FAILED}
        await d.stop()
        await rm.stop()

    asyncio.run(body())


def test_recoveries_are_counted_per_job_across_leaders(tmp_path: Path) -> None:
    graphs = FileSystemJobGraphStore(str(tmp_path / "graphs"))
    jg = _job("twice")
    graphs.put_job_graph(jg)
    persistence = _persistence(tmp_path)
    assert persistence.recover().recoveries == {jg.job_id: 1}
    assert persistence.recover().recoveries == {jg.job_id: 2}  # the next leader's
    graphs.remove_job_graph(jg.job_id)
    graphs.put_job_graph(jg)  # gone with the graph: a new submission starts at zero
    assert persistence.recover().recoveries == {jg.job_id: 1}


def test_a_deposed_leader_records_no_result(tmp_path: Path) -> None:
    """The leadership check fails (a newer leader took over): the job's result is not written
    and its graph stays for the newer leader."""

    def deposed() -> None:
        raise LeadershipLostException("this JobManager no longer leads (session s1)")

    async def body() -> None:
        persistence = _persistence(tmp_path)
        _, rm, d, gw, masters = await _setup(persistence=persistence, leadership_check=deposed)
        jg = _job("ends under a newer leader")
        await gw.submit_job(jg)
        await wait_until(lambda: masters and masters[0].is_running)
        assert masters[0].kwargs["leadership_check"] is deposed  # the JobMaster checks too
        masters[0].finish("FAILED")
        await wait_until(lambda: jg.job_id in d._completed)
        results = FileSystemJobResultStore(str(tmp_path / "results"))
        assert not results.has_job_result_entry(jg.job_id)
        assert FileSystemJobGraphStore(str(tmp_path / "graphs")).job_ids() == [jg.job_id]
        await d.stop()
        await rm.stop()

    asyncio.run(body())


def test_a_job_finished_under_a_dead_leader_is_refused_even_when_not_listed(
        tmp_path: Path) -> None:
    async def body() -> None:
        jg = _job("finished")
        # the old leader died between writing the dirty entry and the cleanup
        FileSystemJobGraphStore(str(tmp_path / "graphs")).put_job_graph(jg)
        FileSystemJobResultStore(str(tmp_path / "results")).create_dirty_result(
            JobResultEntry(jg.job_id, "SUCCEEDED", 5, jg.name))
        d, rm, gw, masters = await _leader(tmp_path, recover=False)
        with pytest.raises(DuplicateJobSubmissionException, match="already finished"):
            await gw.submit_job(jg)
        await d.stop()
        await rm.stop()
        d, rm, gw, masters = await _leader(tmp_path, recover=True)
        assert masters == [] and FileSystemJobGraphStore(str(tmp_path / "graphs")).job_ids() == []
        results = FileSystemJobResultStore(str(tmp_path / "results"))
        assert results.get_dirty_results() == [] and results.has_clean_job_result_entry(jg.job_id)
        await d.stop()
        await rm.stop()

    asyncio.run(body())
