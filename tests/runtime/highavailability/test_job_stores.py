"""The JobGraph store and the JobResultStore on the local filesystem: round trips, what a new
leader reads back, corrupt and foreign files, and the dirty -> clean life cycle of a result."""

from __future__ import annotations

from pathlib import Path

import pytest

from flintlock.config import Configuration
from flintlock.runtime.highavailability.job_graph_store import (
    FileSystemJobGraphStore,
    JobGraphStoreException,
)
from flintlock.runtime.highavailability.job_result_store import (
    FileSystemJobResultStore,
    JobResultEntry,
    JobResultStoreException,
)
from flintlock.runtime.highavailability.services import (
    HighAvailabilityConfigurationException,
    create_ha_services,
)
from flintlock.runtime.ids import JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import JobType


def _graph(name: str = "job") -> JobGraph:
    vertex = JobVertex(JobVertexID.generate(), "Source", 2, 128, "flintlock.runtime.spark:Task",
                       b"\x00payload")
    return JobGraph(JobID.generate(), name, JobType.BATCH, (vertex,),
                    {"execution.runtime-mode": "BATCH"})


def test_job_graphs_round_trip_and_are_listed_until_removed(tmp_path: Path) -> None:
    store = FileSystemJobGraphStore(str(tmp_path / "graphs"))
    a, b = _graph("a"), _graph("b")
    store.put_job_graph(a)
    store.put_job_graph(b)
    (tmp_path / "graphs" / "notes.txt").write_text("not a graph")
    (tmp_path / "graphs" / "submittedJobGraph-xyz").write_text("not an id")
    assert store.job_ids() == sorted([a.job_id, b.job_id], key=str)
    # a new leader's store reads what the old one wrote
    again = FileSystemJobGraphStore(str(tmp_path / "graphs"))
    assert again.recover_job_graph(a.job_id) == a
    again.remove_job_graph(a.job_id)
    again.remove_job_graph(a.job_id)  # gone already: no error
    assert store.job_ids() == [b.job_id]
    assert not list((tmp_path / "graphs").glob(".*tmp"))  # nothing half-written left


def test_a_corrupt_or_missing_job_graph_is_named(tmp_path: Path) -> None:
    store = FileSystemJobGraphStore(str(tmp_path))
    graph = _graph()
    store.put_job_graph(graph)
    path = tmp_path / f"submittedJobGraph-{graph.job_id}"
    path.write_bytes(path.read_bytes()[:40])  # cut short
    with pytest.raises(JobGraphStoreException, match=f"{graph.job_id} .* is corrupt"):
        store.recover_job_graph(graph.job_id)
    missing = JobID.generate()
    with pytest.raises(JobGraphStoreException, match=f"{missing} cannot be read"):
        store.recover_job_graph(missing)


@pytest.mark.parametrize("delete_on_commit", [False, True])
def test_a_result_is_dirty_until_its_cleanup_then_clean(tmp_path: Path,
                                                        delete_on_commit: bool) -> None:
    store = FileSystemJobResultStore(str(tmp_path / "results"), delete_on_commit)
    entry = JobResultEntry(JobID.generate(), "SUCCEEDED", 1234, "q3")
    assert not store.has_job_result_entry(entry.job_id)
    store.create_dirty_result(entry)
    assert store.has_dirty_job_result_entry(entry.job_id) and store.get_dirty_results() == [entry]
    with pytest.raises(JobResultStoreException, match="already has a result entry"):
        store.create_dirty_result(entry)
    store.mark_result_as_clean(entry.job_id)
    if not delete_on_commit:
        store.mark_result_as_clean(entry.job_id)  # clean already: nothing to do
    assert store.get_dirty_results() == []
    assert store.has_clean_job_result_entry(entry.job_id) is (not delete_on_commit)
    if not delete_on_commit:  # Flink's file name and document
        doc = (tmp_path / "results" / f"{entry.job_id}.json").read_text()
        assert JobResultEntry.from_json(doc) == entry and '"application-status": "SUCCEEDED"' in doc
    with pytest.raises(JobResultStoreException, match="no dirty result entry"):
        store.mark_result_as_clean(JobID.generate())


def test_services_come_from_the_configuration(tmp_path: Path) -> None:
    assert create_ha_services(Configuration({})) is None
    services = create_ha_services(Configuration({
        "high-availability.type": "file", "high-availability.storageDir": f"file://{tmp_path}",
        "high-availability.cluster-id": "/team-a"}))
    assert services is not None and services.directory == f"{tmp_path}/team-a"
    assert services.job_result_store_uri == f"{tmp_path}/job-result-store/team-a"
    services.job_graph_store().put_job_graph(_graph())
    assert len(list((tmp_path / "team-a" / "job-graphs").iterdir())) == 1


@pytest.mark.parametrize(("settings", "message"), [
    ({"high-availability.type": "FILE"}, "needs high-availability.storageDir"),
    ({"high-availability.type": "FILE", "high-availability.storageDir": "s3://b/ha"},
     "must be a local directory"),
    ({"high-availability.type": "FILE", "high-availability.storageDir": "/tmp/ha",
      "high-availability.cluster-id": "/../x"}, "must be a path of names"),
    ({"high-availability.type": "ZOOKEEPER", "high-availability.storageDir": "/tmp/ha"},
     "needs high-availability.zookeeper.quorum"),
])
def test_incomplete_settings_are_named(settings: dict[str, str], message: str) -> None:
    with pytest.raises(HighAvailabilityConfigurationException, match=message):
        create_ha_services(Configuration(settings))


def test_a_storage_dir_that_cannot_be_written_is_named(tmp_path: Path) -> None:
    """Checked before a JobManager contends (and by ``cluster start``): a clear error instead
    of a leader that fails at its first submission. Run as root, so the directory is made
    unwritable by putting it under a regular file."""
    import subprocess
    import sys

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    settings = {"high-availability.type": "FILE",
                "high-availability.storageDir": str(blocker / "ha")}
    services = create_ha_services(Configuration(settings))
    assert services is not None
    with pytest.raises(HighAvailabilityConfigurationException,
                       match=f"storageDir {blocker / 'ha'} cannot be written"):
        services.check_storage()
    ok = create_ha_services(Configuration({**settings, "high-availability.storageDir":
                                           str(tmp_path / "ha")}))
    assert ok is not None
    ok.check_storage()
    assert [p.name for p in (tmp_path / "ha" / "default").iterdir()] == []  # no probe left
    jobmanager = subprocess.run(
        [sys.executable, "-m", "flintlock", "jobmanager", "-D", "rest.port=0",
         "-D", "jobmanager.rpc.port=0", *[a for k, v in settings.items() for a in ("-D", f"{k}={v}")]],
        capture_output=True, text=True, timeout=120)
    assert jobmanager.returncode == 1, jobmanager.stdout + jobmanager.stderr
    assert "cannot be written" in jobmanager.stderr, jobmanager.stderr
