"""Restart strategies per job: PyFlink's ``RestartStrategies``, ``env.set_restart_strategy``,
``env.configure``, validation, and the job's keys overriding the cluster's on a MiniCluster
(control plane: test invokables, no Spark)."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

import pytest

from flintlock import StreamExecutionEnvironment
from flintlock.api import RestartStrategies
from flintlock.client.context import ClientContext, client_context
from flintlock.config import Configuration, IllegalConfigurationException
from flintlock.runtime.ids import JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import JobStatus, JobType
from flintlock.runtime.minicluster import MiniCluster
from flintlock.testing.clusters import gen_mini_cluster
from flintlock.testing.waiting import wait_until_async

FAILING = "flintlock.testing.invokables:FailingInvokable"
FIXED = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "2",
         "restart-strategy.fixed-delay.delay": "10 ms"}


def _job_keys(env: StreamExecutionEnvironment) -> dict[str, str]:
    env.from_sequence(1, 3).print()
    conf = env.get_job_graph("job").configuration
    return {k: v for k, v in conf.items() if k.startswith("restart-strategy")}


# ---- the API ---------------------------------------------------------------------------------------


def test_each_strategy_sets_flinks_keys() -> None:
    assert RestartStrategies.no_restart().to_configuration() == {"restart-strategy.type": "none"}
    fixed = RestartStrategies.fixed_delay_restart(3, datetime.timedelta(seconds=10))
    assert fixed.to_configuration() == {
        "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
        "restart-strategy.fixed-delay.delay": "10000 ms"}
    assert fixed.get_delay_between_attempts_interval() == datetime.timedelta(seconds=10)
    rate = RestartStrategies.failure_rate_restart(3, 300_000, 10_000)
    assert rate.to_configuration() == {
        "restart-strategy.type": "failure-rate",
        "restart-strategy.failure-rate.max-failures-per-interval": "3",
        "restart-strategy.failure-rate.failure-rate-interval": "300000 ms",
        "restart-strategy.failure-rate.delay": "10000 ms"}
    exp = RestartStrategies.exponential_delay_restart(1, 1000, 1.1, 2000, 0.1)
    assert exp.to_configuration()["restart-strategy.exponential-delay.backoff-multiplier"] == "1.1"
    assert RestartStrategies.fall_back_restart().to_configuration() == {}
    for strategy in (fixed, rate, exp, RestartStrategies.no_restart()):
        assert RestartStrategies.from_configuration(strategy.to_configuration()) == strategy


@pytest.mark.parametrize(("make", "error", "match"), [
    (lambda: RestartStrategies.fixed_delay_restart(-1, 10), ValueError, "restart_attempts"),
    (lambda: RestartStrategies.fixed_delay_restart(3, "10 s"), TypeError, "delay_between_attempts"),
    (lambda: RestartStrategies.fixed_delay_restart(3, -5), ValueError, "at least 0 ms"),
    (lambda: RestartStrategies.failure_rate_restart(0, 1000, 10), ValueError, "max_failure_rate"),
    (lambda: RestartStrategies.exponential_delay_restart(2000, 1000, 2.0, 10, 0.1), ValueError,
     r"initial_backoff \(2000 ms\) must not exceed max_backoff \(1000 ms\)"),
    (lambda: RestartStrategies.exponential_delay_restart(1, 1000, 1.0, 10, 0.1), ValueError,
     "backoff_multiplier must be greater than 1"),
    (lambda: RestartStrategies.exponential_delay_restart(1, 1000, 2.0, 10, 1.5), ValueError,
     r"jitter_factor must be within \[0, 1\]"),
    (lambda: StreamExecutionEnvironment().set_restart_strategy("fixed-delay"), TypeError,
     "RestartStrategies"),
    (lambda: StreamExecutionEnvironment().configure({"restart-strategy.type": "often"}),
     IllegalConfigurationException, "restart-strategy.type"),
    (lambda: StreamExecutionEnvironment().configure(
        {"restart-strategy.fixed-delay.attempts": "three"}), IllegalConfigurationException,
     "restart-strategy.fixed-delay.attempts"),
    (lambda: RestartStrategies.from_configuration({
        "restart-strategy.type": "exponential-delay",
        "restart-strategy.exponential-delay.initial-backoff": "2 min"}),
     IllegalConfigurationException, "must not exceed max_backoff"),
])
def test_bad_values_are_named(make, error, match) -> None:
    with pytest.raises(error, match=match):
        make()


def test_the_job_carries_the_latest_setting_above_config_yaml_and_cli(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.yaml").write_text(
        "restart-strategy.type: failure-rate\nrestart-strategy.fixed-delay.attempts: 9\n")
    monkeypatch.setenv("FLINTLOCK_CONF_DIR", str(tmp_path))
    assert _job_keys(StreamExecutionEnvironment())["restart-strategy.type"] == "failure-rate"
    cli = Configuration({"restart-strategy.type": "none"})
    with client_context(ClientContext(overrides=cli)):
        assert _job_keys(StreamExecutionEnvironment()) == {
            "restart-strategy.type": "none", "restart-strategy.fixed-delay.attempts": "9"}
        env = StreamExecutionEnvironment()
        env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 500))
        assert env.get_restart_strategy() == RestartStrategies.fixed_delay_restart(3, 500)
        env.configure({"restart-strategy.fixed-delay.attempts": 4})  # later call wins
        assert env.get_restart_strategy() == RestartStrategies.fixed_delay_restart(4, 500)
        env.set_restart_strategy(RestartStrategies.fall_back_restart())
        assert env.get_restart_strategy() == RestartStrategies.fall_back_restart()
        assert _job_keys(env) == {}  # nothing from config.yaml or -D: the cluster's applies
        env.configure({"restart-strategy.type": "fixed-delay"})  # lower layers count again
        assert _job_keys(env) == {"restart-strategy.type": "fixed-delay",
                                  "restart-strategy.fixed-delay.attempts": "9"}


# ---- job configuration over cluster configuration (the JobMaster's overlay) -------------------------


def _failing_job(configuration: dict[str, str]) -> JobGraph:
    vertex = JobVertex(JobVertexID.generate(), "Fail", 1, 128, FAILING)
    return JobGraph(JobID.generate(), "failing", JobType.BATCH, (vertex,), configuration)


async def _restarts_until_failed(cluster: MiniCluster, configuration: dict[str, str]) -> int:
    job = _failing_job(configuration)
    result = await cluster.execute(job, timeout_s=20)
    assert result.application_status == "FAILED"
    archived = await cluster.dispatcher_gateway.request_job(job.job_id)
    assert archived.vertices[0].subtasks[0].attempt_number == archived.number_of_restarts
    return archived.number_of_restarts


@gen_mini_cluster(task_managers=1, slots_per_task_manager=1, config={"restart-strategy.type": "none"})
async def test_a_jobs_restart_strategy_overrides_the_clusters_none(cluster: MiniCluster) -> None:
    assert await _restarts_until_failed(cluster, {}) == 0
    assert await _restarts_until_failed(cluster, FIXED) == 2


@gen_mini_cluster(task_managers=1, slots_per_task_manager=1, config=FIXED)
async def test_a_jobs_none_overrides_the_clusters_fixed_delay(cluster: MiniCluster) -> None:
    assert await _restarts_until_failed(cluster, {}) == 2
    assert await _restarts_until_failed(cluster, {"restart-strategy.type": "none"}) == 0
    assert await _restarts_until_failed(cluster, {
        "restart-strategy.fixed-delay.attempts": "1"}) == 1  # the cluster's type, the job's count


@gen_mini_cluster(task_managers=1, slots_per_task_manager=1)
async def test_a_bad_restart_strategy_combination_fails_the_job_naming_it(cluster: MiniCluster) -> None:
    job = _failing_job({"restart-strategy.type": "exponential-delay",
                        "restart-strategy.exponential-delay.initial-backoff": "2 min"})
    result = await cluster.execute(job, timeout_s=20)
    assert result.application_status == "FAILED" and result.failure is not None
    assert "initial-backoff must be <= max-backoff" in result.failure.error.message


@gen_mini_cluster(task_managers=1, slots_per_task_manager=1)
async def test_cancel_while_restarting_ends_the_job_at_once(cluster: MiniCluster) -> None:
    job = _failing_job({"restart-strategy.type": "fixed-delay",
                        "restart-strategy.fixed-delay.delay": "60 s"})
    gateway = cluster.dispatcher_gateway
    await cluster.submit_job(job)
    states: list[JobStatus] = []

    async def restarting() -> bool:
        states.append(await gateway.request_job_status(job.job_id))
        return states[-1] is JobStatus.RESTARTING

    await wait_until_async(restarting, 10, interval_s=0.01, describe=lambda: states)
    loop = asyncio.get_running_loop()
    archived = await gateway.request_job(job.job_id)
    assert archived.next_restart_attempt_ms is not None
    assert archived.next_restart_attempt_ms - archived.exception_history[-1].timestamp_ms == 60_000
    started = loop.time()
    await gateway.cancel_job(job.job_id)
    result = await cluster.wait_for_job_result(job.job_id, timeout_s=5)
    assert result.application_status == "CANCELED" and loop.time() - started < 5
