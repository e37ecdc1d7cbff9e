"""Flink REST v1 checkpoint endpoints (``/jobs/:jobid/checkpoints``, ``/checkpoints/config``,
``/checkpoints/details/:id``, ``.../subtasks/:vertexid``) and the checkpoint metrics of ``/jobs/:jobid/metrics``, served from
the ``checkpoint_stats`` of a job's ``ArchivedExecutionGraph``."""

from __future__ import annotations

import pytest

from flintlock.runtime.checkpoint.coordinator import (
    CheckpointCoordinator,
    CheckpointSettings,
    FinalizeCheckpoint,
    TaskToCheckpoint,
)
from flintlock.runtime.checkpoint.snapshots import OperatorStateHandle, TaskStateSnapshot
from flintlock.runtime.checkpoint.stats import CheckpointStatsSnapshot, snapshot_stats
from flintlock.runtime.dispatcher.exceptions import FlinkJobNotFoundException
from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph, ArchivedJobVertex
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID, JobID, JobVertexID
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus, JobType

PREFIXES = pytest.mark.parametrize("prefix", ["/v1", ""])

JOB = JobID("0123456789abcdef0123456789abcdef")
SRC = JobVertexID("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
T0 = 1_700_000_000_000


def _tasks() -> list[TaskToCheckpoint]:
    return [TaskToCheckpoint(ExecutionAttemptID(ExecutionVertexID(SRC, i), 0, "x"),
                             ExecutionState.RUNNING, True, f"te{i}") for i in range(2)]


def _stats() -> CheckpointStatsSnapshot:
    """Checkpoint 1 completed (1 s, 300 bytes), 2 failed, 3 in progress."""
    c = CheckpointCoordinator(str(JOB), CheckpointSettings(
        interval_s=5.0, timeout_s=60.0, tolerable_failures=4, directory="/cp"))
    c.trigger(0.0, T0, _tasks())
    out: list[object] = []
    for task, size in zip(_tasks(), (100, 200), strict=True):
        state = TaskStateSnapshot({}, (OperatorStateHandle(0, "op", size_bytes=size),))
        out += c.acknowledge(task.attempt_id, 1, state, T0 + 900)
    (finalize,) = out
    assert isinstance(finalize, FinalizeCheckpoint)
    c.finalized(finalize.checkpoint, None, 1.0, T0 + 1_000)
    c.trigger(5.0, T0 + 5_000, _tasks())
    c.expire(2, 65.0, T0 + 65_000)
    c.trigger(70.0, T0 + 70_000, _tasks())
    return snapshot_stats(c)


def _graph(stats: CheckpointStatsSnapshot | None) -> ArchivedExecutionGraph:
    return ArchivedExecutionGraph(
        job_id=JOB, name="events", job_type=JobType.STREAMING, state=JobStatus.RUNNING,
        state_timestamps={"INITIALIZING": T0 - 100, "RUNNING": T0},
        vertices=(ArchivedJobVertex(SRC, "Source: events", 2, 128, "default", ()),),
        checkpoint_stats=stats)


@pytest.fixture
def with_checkpoints(rest):
    rest.on("request_job", lambda job_id: _graph(_stats()))
    return rest


@pytest.fixture
def without_checkpoints(rest):
    rest.on("request_job", lambda job_id: _graph(None))
    return rest


@PREFIXES
def test_statistics(with_checkpoints, prefix):
    r = with_checkpoints.client.get(f"{prefix}/jobs/{JOB}/checkpoints")
    assert r.status_code == 200
    body = r.json()
    assert body["counts"] == {"restored": 0, "total": 3, "in_progress": 1, "completed": 1,
                              "failed": 1}
    assert [(h["id"], h["className"], h["status"]) for h in body["history"]] == [
        (3, "in_progress", "IN_PROGRESS"), (2, "failed", "FAILED"), (1, "completed", "COMPLETED")]
    completed = body["latest"]["completed"]
    assert completed == body["history"][2]
    assert (completed["state_size"], completed["end_to_end_duration"]) == (300, 1_000)
    assert completed["external_path"] == f"/cp/{JOB}/chk-1"
    assert body["latest"]["failed"]["failure_timestamp"] == T0 + 65_000
    assert "expired" in body["latest"]["failed"]["failure_message"]
    assert body["latest"]["savepoint"] is None and body["latest"]["restored"] is None
    assert body["summary"]["state_size"]["max"] == 300
    assert body["summary"]["end_to_end_duration"]["p50"] == 1_000.0
    assert body["summary"]["alignment_buffered"]["max"] == 0


@PREFIXES
def test_statistics_of_a_job_without_checkpointing_are_empty(without_checkpoints, prefix):
    body = without_checkpoints.client.get(f"{prefix}/jobs/{JOB}/checkpoints").json()
    assert body["counts"] == {"restored": 0, "total": 0, "in_progress": 0, "completed": 0,
                              "failed": 0}
    assert body["history"] == []
    assert body["latest"] == {"completed": None, "savepoint": None, "failed": None,
                              "restored": None}


@PREFIXES
def test_config(with_checkpoints, prefix):
    r = with_checkpoints.client.get(f"{prefix}/jobs/{JOB}/checkpoints/config")
    assert r.status_code == 200
    body = r.json()
    assert (body["mode"], body["interval"], body["timeout"], body["min_pause"]) == (
        "exactly_once", 5_000, 60_000, 0)
    assert (body["max_concurrent"], body["tolerable_failed_checkpoints"]) == (1, 4)
    assert body["externalization"] == {"enabled": False, "delete_on_cancellation": True}
    assert (body["state_backend"], body["checkpoint_storage"]) == (
        "hashmap", "FileSystemCheckpointStorage")


def test_config_of_a_job_without_checkpointing_says_periodic_checkpoints_are_off(
        without_checkpoints):
    """As Flink answers for a DataStream job without checkpointing (its dashboard shows
    "Periodic checkpoints disabled" and raises no error)."""
    r = without_checkpoints.client.get(f"/jobs/{JOB}/checkpoints/config")
    assert r.status_code == 200
    body = r.json()
    assert (body["interval"], body["mode"], body["timeout"], body["max_concurrent"]) == (
        2**63 - 1, "exactly_once", 600_000, 1)
    assert body["externalization"] == {"enabled": False, "delete_on_cancellation": True}


@PREFIXES
def test_details_list_the_vertices(with_checkpoints, prefix):
    r = with_checkpoints.client.get(f"{prefix}/jobs/{JOB}/checkpoints/details/1")
    assert r.status_code == 200
    body = r.json()
    assert (body["id"], body["className"], body["discarded"]) == (1, "completed", False)
    task = body["tasks"][str(SRC)]
    assert (task["num_subtasks"], task["num_acknowledged_subtasks"]) == (2, 2)
    assert task["state_size"] == 300 and task["status"] == "COMPLETED"
    pending = with_checkpoints.client.get(f"/jobs/{JOB}/checkpoints/details/3").json()
    assert pending["tasks"][str(SRC)]["num_acknowledged_subtasks"] == 0


@PREFIXES
def test_subtask_details(with_checkpoints, prefix):
    r = with_checkpoints.client.get(f"{prefix}/jobs/{JOB}/checkpoints/details/1/subtasks/{SRC}")
    assert r.status_code == 200
    body = r.json()
    assert (body["id"], body["status"], body["num_acknowledged_subtasks"]) == (1, "COMPLETED", 2)
    assert (body["latest_ack_timestamp"], body["end_to_end_duration"]) == (T0 + 900, 900)
    assert [(s["index"], s["status"], s["state_size"], s["ack_timestamp"])
            for s in body["subtasks"]] == [(0, "completed", 100, T0 + 900),
                                           (1, "completed", 200, T0 + 900)]
    assert body["subtasks"][0]["checkpoint"] == {"sync": 900, "async": 0}
    assert (body["summary"]["state_size"]["min"], body["summary"]["state_size"]["max"]) == (
        100, 200)
    assert body["summary"]["checkpoint_duration"]["sync"]["p50"] == 900.0
    pending = with_checkpoints.client.get(f"/jobs/{JOB}/checkpoints/details/3/subtasks/{SRC}")
    assert [s for s in pending.json()["subtasks"]] == [
        {"className": "pending", "index": i, "status": "pending_or_failed"} for i in range(2)]


def test_subtask_details_errors(with_checkpoints):
    other = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
    r = with_checkpoints.client.get(f"/jobs/{JOB}/checkpoints/details/1/subtasks/{other}")
    assert r.status_code == 404
    assert r.json() == {"errors": [f"There is no checkpoint statistics for task {other} in "
                                   "checkpoint 1."]}
    r = with_checkpoints.client.get(f"/jobs/{JOB}/checkpoints/details/1/subtasks/nope")
    assert r.status_code == 400 and "vertexid" in r.json()["errors"][0]
    r = with_checkpoints.client.get(f"/jobs/{JOB}/checkpoints/details/99/subtasks/{SRC}")
    assert r.status_code == 404


def test_details_errors(with_checkpoints, make_rest):
    r = with_checkpoints.client.get(f"/jobs/{JOB}/checkpoints/details/99")
    assert r.status_code == 404
    assert r.json() == {"errors": ["Could not find checkpointing statistics for checkpoint 99."]}
    r = with_checkpoints.client.get(f"/jobs/{JOB}/checkpoints/details/latest")
    assert r.status_code == 400
    assert "checkpointid" in r.json()["errors"][0]

    plain = make_rest()
    plain.on("request_job", lambda job_id: _graph(None))
    r = plain.client.get(f"/jobs/{JOB}/checkpoints/details/1")
    assert r.status_code == 404
    assert r.json() == {"errors": [f"Checkpointing was not enabled for job {JOB}."]}


def test_unknown_job_and_malformed_job_id(rest):
    def unknown(job_id: JobID) -> None:
        raise FlinkJobNotFoundException(job_id)

    rest.on("request_job", unknown)
    for path in ("checkpoints", "checkpoints/config", "checkpoints/details/1"):
        assert rest.client.get(f"/jobs/{JOB}/{path}").status_code == 404
        assert rest.client.get(f"/jobs/not-a-job/{path}").status_code == 400


def test_job_metrics_include_the_checkpoint_metrics(with_checkpoints):
    url = f"/jobs/{JOB}/metrics"
    ids = {m["id"] for m in with_checkpoints.client.get(url).json()}
    assert ids >= {"numRestarts", "lastCheckpointDuration", "lastCheckpointSize",
                   "numberOfCompletedCheckpoints", "numberOfFailedCheckpoints",
                   "numberOfInProgressCheckpoints", "lastCheckpointRestoreTimestamp",
                   "totalNumberOfCheckpoints"}
    body = with_checkpoints.client.get(url, params={
        "get": "lastCheckpointDuration,lastCheckpointSize,totalNumberOfCheckpoints,"
               "lastCheckpointRestoreTimestamp"}).json()
    assert body == [{"id": "lastCheckpointDuration", "value": "1000"},
                    {"id": "lastCheckpointSize", "value": "300"},
                    {"id": "totalNumberOfCheckpoints", "value": "3"},
                    {"id": "lastCheckpointRestoreTimestamp", "value": "-1"}]


def test_job_metrics_of_a_job_without_checkpointing_have_no_checkpoint_metrics(rest):
    rest.on("request_job", lambda job_id: _graph(None))
    ids = {m["id"] for m in rest.client.get(f"/jobs/{JOB}/metrics").json()}
    assert "numberOfCompletedCheckpoints" not in ids and "numRestarts" in ids
