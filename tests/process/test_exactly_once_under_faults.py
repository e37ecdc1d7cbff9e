"""Exactly-once under seeded faults on a session cluster of processes (STYLE layer 4).

The short version of ``benchmarks/streaming/fault_runs.py`` (issue 12's fault-injection runs):
each of the four checkpointed STREAMING jobs of ``benchmarks/streaming/fault_jobs.py`` (a keyed
running count, event-time windows, and the ``carrier_alerts`` and ``departures`` examples) runs
once with its seeded ``FaultPlan``: two task failures at records, a TaskManager SIGKILLed (and
replaced), a checkpoint declined and a checkpoint expired (a TaskManager paused with SIGSTOP),
each while the job runs. The committed output is exactly what the job computes without faults:
no record lost, none duplicated. (CI runs one of the four: see ``ALL_RUNS``.)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

if str(Path(__file__).resolve().parents[2]) not in sys.path:  # benchmarks/, examples/, tests/
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.failover import REPO, SessionCluster
from benchmarks.streaming.fault_runs import FaultRun, fault_cluster
from flintlock.testing.fault_plan import plan_faults

pytestmark = [pytest.mark.process, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

DATA = str(REPO / "data" / "test")
#: (records, records per second): ~25 s without faults, long enough for every fault
SHORT = {"running-counts": (5000, 200), "windows": (7500, 300),
         "carrier-alerts": (12000, 500), "departures": (12000, 500)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionCluster]:
    with fault_cluster(tmp_path_factory.mktemp("fault-cluster")) as c:
        yield c


#: Each run takes ~1.5 min (``departures`` ~2.5 min), so CI runs one: ``ListState`` with
#: event-time timers (``carrier-alerts``). Window state and keyed ``ValueState`` (the running
#: counts) restored exactly once after a task failure, a lost TaskManager and failed checkpoints
#: are also covered by tests/e2e/test_checkpoints.py. FLINTLOCK_ALL_FAULT_RUNS=1 runs all four
#: here; ``benchmarks/streaming/fault_runs.py`` runs them all with more seeds.
ALL_RUNS = os.environ.get("FLINTLOCK_ALL_FAULT_RUNS", "") == "1"
_ALL_ONLY = pytest.mark.skipif(not ALL_RUNS, reason="CI time; FLINTLOCK_ALL_FAULT_RUNS=1 runs it")


@pytest.mark.parametrize("job, seed", [
    pytest.param("running-counts", 11, marks=_ALL_ONLY), pytest.param("windows", 12, marks=_ALL_ONLY),
    ("carrier-alerts", 13),
    pytest.param("departures", 14, marks=_ALL_ONLY),
])
def test_committed_output_is_exactly_once_under_seeded_faults(
        cluster: SessionCluster, tmp_path: Path, job: str, seed: int) -> None:
    records, rate = SHORT[job]
    plan = plan_faults(seed, records=records)
    result = FaultRun(cluster, job, plan, tmp_path, records=records, rate=rate, data=DATA).run()
    assert result.state == "FINISHED", result
    # every fault of the plan hit the running job
    assert sorted(f.kind for f in result.injected) == sorted(f.kind.value for f in plan.timed), result
    assert len(result.failed_records) == len(plan.failing_records), result
    assert result.checkpoints["failed"] >= 2 and result.checkpoints["restored"] >= 3, result
    (kill,) = [f for f in result.injected if f.kind == "kill-taskmanager"]
    assert kill.recovery_to_output_s is not None, result
    assert result.problems == [], result
