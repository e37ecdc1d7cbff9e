"""A session cluster as users run it: ``flintlock cluster start``, ``run``, ``list``, ``cancel``,
REST, ``cluster stop`` (STYLE layer 4: separate processes, talked to only through CLI and REST)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
from cluster_helpers import FLINTLOCK, REPO, SLOW_PROGRAM, job, run_remote, wait_for_job_state

pytestmark = [pytest.mark.process, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

DATA = REPO / "data" / "test"


def _cli(state: Path, *args: str, timeout: float = 300, check: bool = False) -> subprocess.CompletedProcess[str]:
    """``flintlock <command> ... -D cluster.state-dir=<state>``: finds the cluster by its port file."""
    proc = subprocess.run([*FLINTLOCK, *args, "-D", f"cluster.state-dir={state}"],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)
    if check:
        assert proc.returncode == 0, f"{args}: {proc.stdout}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture
def cluster(session_cluster: dict[str, object]) -> dict[str, object]:
    return session_cluster


_run = run_remote
_job = job


def test_run_tpch_q3_list_and_rest_agree(cluster: dict[str, object]) -> None:
    proc = _run(cluster, "examples/tpch/q3.py", "--data", str(DATA))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "FINISHED" in proc.stderr
    overview = httpx.get(f"{cluster['rest']}/overview").json()
    assert overview["taskmanagers"] == 2 and overview["slots-total"] == 4
    assert overview["jobs-finished"] >= 1
    listed = _cli(cluster["state"], "list", "-a", check=True).stdout
    jobs = httpx.get(f"{cluster['rest']}/v1/jobs/overview").json()["jobs"]
    for listed_job in jobs:
        assert f"{listed_job['jid']} : {listed_job['name']} ({listed_job['state']})" in listed


def test_two_jobs_at_once_and_cancel(cluster: dict[str, object], tmp_path: Path) -> None:
    prog = tmp_path / "slow.py"
    prog.write_text(SLOW_PROGRAM)
    ids = []
    for name, rows in (("long", "20000"), ("short", "200")):
        proc = _run(cluster, "-d", str(prog), str(tmp_path / name), rows, name)
        assert proc.returncode == 0, proc.stderr[-3000:]
        ids.append(proc.stderr.split("JobID")[-1].split()[0])
    long_id, short_id = ids
    wait_for_job_state(cluster, short_id, "FINISHED", 180)
    assert _job(cluster, long_id)["state"] == "RUNNING"  # both ran at once; the long one still runs
    cancel = _cli(cluster["state"], "cancel", long_id, check=True)
    assert long_id in cancel.stdout
    wait_for_job_state(cluster, long_id, "CANCELED", 60)
    assert not (tmp_path / "long").exists() or not any((tmp_path / "long").glob("*.parquet"))
    assert any((tmp_path / "short").glob("*.parquet"))


def test_bad_requests_and_unknown_jobs(cluster: dict[str, object]) -> None:
    unknown = "0" * 32
    r = httpx.get(f"{cluster['rest']}/v1/jobs/{unknown}")
    assert r.status_code == 404 and r.json()["errors"]
    r = httpx.get(f"{cluster['rest']}/jobs/not-a-job-id")
    assert r.status_code == 400 and r.json()["errors"]
    r = httpx.post(f"{cluster['rest']}/v1/jobs", content=b"x" * 1000)
    assert 400 <= r.status_code < 500 and r.json()["errors"]
    proc = _cli(cluster["state"], "cancel", unknown)
    assert proc.returncode == 1 and "404" in proc.stderr


def test_client_names_where_it_looked_when_no_cluster_runs(tmp_path: Path) -> None:
    proc = subprocess.run([*FLINTLOCK, "list", "-m", "127.0.0.1:9", "-D",
                           f"cluster.state-dir={tmp_path}"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1
    assert "No flintlock cluster is reachable at http://127.0.0.1:9" in proc.stderr


def test_a_program_importing_its_own_module_runs_on_the_cluster(cluster: dict[str, object],
                                                                 tmp_path: Path) -> None:
    (tmp_path / "mywords.py").write_text(
        "def split(row):\n    return [(w.lower(),) for w in row.value.split()]\n")
    prog = tmp_path / "wc.py"
    prog.write_text(
        "import mywords\n"
        "from flintlock import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "rows = (env.from_collection([('Hello World',), ('hello flintlock',)], 'value string')\n"
        "        .flat_map(mywords.split, 'word string').key_by('word').count().sort('word')\n"
        "        .execute_and_collect())\n"
        "print('RESULT', [tuple(r) for r in rows])\n")
    proc = _run(cluster, str(prog))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "RESULT [('flintlock', 1), ('hello', 2), ('world', 1)]" in proc.stdout


def test_run_without_target_submits_to_the_running_cluster(cluster: dict[str, object]) -> None:
    """Flink's ``flink run``: the cluster ``flintlock cluster start`` left running is the target;
    ``--target local`` keeps the job in the client process."""

    def job_names() -> list[str]:
        return [j["name"] for j in httpx.get(f"{cluster['rest']}/v1/jobs/overview").json()["jobs"]]

    def run(*args: str) -> str:
        proc = subprocess.run([*FLINTLOCK, "run", "-D", f"cluster.state-dir={cluster['state']}",
                               *args, "examples/tpch/q6.py", "--data", str(DATA)],
                              capture_output=True, text=True, timeout=300, cwd=REPO)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return proc.stderr

    before = job_names()
    remote = run()
    assert f"on the session cluster at {cluster['rest'].replace('127.0.0.1', 'localhost')}" \
        in remote, remote
    after = job_names()
    assert len(after) == len(before) + 1, (before, after)

    local = run("--target", "local")
    assert "on a local cluster in this process" in local, local
    assert "FINISHED" in local
    assert len(job_names()) == len(after)  # nothing reached the session cluster


def test_a_streaming_program_collects_rows_live_from_the_cluster(cluster: dict[str, object],
                                                                 tmp_path: Path) -> None:
    """``execute_and_collect`` on an unbounded job goes through REST's coordinators endpoint
    (with the cluster secret); leaving the ``with`` block cancels the job on the cluster."""
    prog = tmp_path / "live.py"
    prog.write_text(
        "from flintlock import RuntimeExecutionMode, StreamExecutionEnvironment\n"
        "from flintlock.connectors import DataGeneratorSource, RateLimiterStrategy\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.set_parallelism(2).set_runtime_mode(RuntimeExecutionMode.STREAMING)\n"
        "source = DataGeneratorSource(lambda i: (i,), None, RateLimiterStrategy.per_second(200),\n"
        "                             'id long')\n"
        "with env.from_source(source).rebalance().execute_and_collect() as rows:\n"
        "    print('JOB', rows.job_id, flush=True)\n"
        "    got = [next(rows).id for _ in range(30)]\n"
        "    print('STATUS', rows.job_client.get_job_status().name, flush=True)\n"
        "print('RESULT', len(set(got)))\n")
    proc = _run(cluster, str(prog))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "STATUS RUNNING" in proc.stdout and "RESULT 30" in proc.stdout, proc.stdout
    job_id = proc.stdout.split("JOB ", 1)[1].split()[0]
    wait_for_job_state(cluster, job_id, "CANCELED", 30)
