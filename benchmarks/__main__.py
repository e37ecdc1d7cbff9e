"""``python -m benchmarks run|report``: the flintlock benchmark harness (see docs/benchmarks.md).

    python -m benchmarks run [--sf 1] [--runs 3] [--systems a,b] [--workloads x,y] ...
    python -m benchmarks run --spark-remote sc://host:15002|standalone ...
    python -m benchmarks report benchmarks/results/<date>-<host>.json
"""

from __future__ import annotations

import os
import sys

import click

from benchmarks.runner import EXTRA_WORKLOADS, Settings, run_benchmark
from benchmarks.spark_target import check_spec
from benchmarks.systems import STANDALONE, SYSTEMS, RunFailed, system_names
from benchmarks.verify import WrongAnswer
from benchmarks.workloads import TPCH, WORKLOADS


def _names(value: str, allowed: tuple[str, ...], what: str,
           groups: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    names = []
    for n in (n.strip() for n in value.split(",")):
        names += (groups or {}).get(n, (n,) if n else ())
    names = list(dict.fromkeys(names))  # a name given twice runs once
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise click.BadParameter(f"unknown {what} {unknown or value!r}; choose from "
                                 f"{', '.join(allowed)}")
    return names


def _sizes(value: str) -> list[int]:
    try:
        sizes = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r}: expected comma-separated integers") from None
    if any(n < 1 for n in sizes):
        raise click.BadParameter("subtask counts must be positive")
    return sizes


def _spark_remote(spec: str | None, conf: tuple[str, ...]) -> tuple[str | None, list[str]]:
    """``--spark-remote`` and the ``-D`` list without ``spark.remote``: a ``-D spark.remote=URL``
    alone means ``--spark-remote URL`` (plain PySpark then uses that Spark too)."""
    rest = [c for c in conf if not c.strip().startswith("spark.remote=")]
    given = {c.split("=", 1)[1].strip() for c in conf if c.strip().startswith("spark.remote=")}
    if len(given) > 1 or (spec and given and given != {spec}):
        raise click.BadParameter("use --spark-remote (one Spark for flintlock and plain PySpark), "
                                 "not a different -D spark.remote", param_hint="--spark-remote")
    spec = spec or next(iter(given), None)
    if spec is None:
        return None, rest
    try:
        return check_spec(spec), rest
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--spark-remote") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """flintlock side by side with plain PySpark, PyFlink and DuckDB."""


@cli.command()
@click.option("--sf", type=float, default=1.0, show_default=True, help="TPC-H scale factor.")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Measured rounds per workload.")
@click.option("--warmups", type=click.IntRange(min=0), default=1, show_default=True,
              help="Warm-up rounds per workload (not measured).")
@click.option("--systems", default=",".join(SYSTEMS), show_default=True,
              help=f"Comma-separated systems; a Spark-based one with {STANDALONE} appended runs "
                   "on a Spark standalone cluster the harness starts, beside the others (e.g. "
                   f"flintlock-session{STANDALONE},pyspark-warm{STANDALONE}).")
@click.option("--workloads", default=",".join(("tpch", *(w for w in WORKLOADS if w not in TPCH),
                                               *EXTRA_WORKLOADS)), show_default=True,
              help="Comma-separated workloads (latency, control_plane, slot_sharing and load "
                   "included; the last two start their own 2-TaskManager clusters); 'tpch' "
                   "stands for q1,...,q22.")
@click.option("--data", "data_root", default="data", show_default=True,
              help="Data root (generated there when missing).")
@click.option("--text-copies", type=click.IntRange(min=1), default=38, show_default=True,
              help="Copies of the King James Bible for word count (38 = ~30M words).")
@click.option("-p", "--parallelism", type=click.IntRange(min=1), default=None,
              help="Parallelism of flintlock and PyFlink jobs [default: cores].")
@click.option("--cores", type=click.IntRange(min=1), default=None,
              help="Spark local[N] of plain PySpark, or the worker's cores with --spark-remote "
                   "standalone [default: all cores].")
@click.option("--task-managers", type=click.IntRange(min=1), default=1, show_default=True,
              help="TaskManagers of the session cluster (one per host, as Flink deploys them: "
                   "each has its own Spark server, and two on one host split its cores).")
@click.option("--slots", type=click.IntRange(min=1), default=None,
              help="Slots per TaskManager of the session cluster [default: cores / "
                   "TaskManagers, at least 1].")
@click.option("--timeout", type=float, default=600.0, show_default=True,
              help="Seconds one run may take.")
@click.option("--latency-runs", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--control-plane-sizes", default="1000,2000,5000,10000", show_default=True,
              help="No-op subtasks per control-plane job.")
@click.option("--control-plane-runs", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--control-plane-timeout", type=float, default=180.0, show_default=True,
              help="Seconds one control-plane job may take; larger sizes are skipped after it.")
@click.option("--control-plane-budget", type=float, default=45.0, show_default=True,
              help="Seconds of measured control-plane jobs per size (at least one job runs).")
@click.option("--slot-sharing-runs", type=click.IntRange(min=1), default=8, show_default=True,
              help="Q18 runs per cluster of the slot_sharing workload.")
@click.option("--slot-sharing-measured", type=click.IntRange(min=1), default=4, show_default=True,
              help="The last runs of each slot_sharing cluster that count.")
@click.option("--load-jobs", type=click.IntRange(min=1), default=50, show_default=True,
              help="Small jobs submitted at once in the load workload.")
@click.option("-D", "flintlock_conf", multiple=True, metavar="KEY=VALUE",
              help="Extra flintlock configuration for both flintlock systems (repeatable).")
@click.option("--spark-remote", metavar="URL|standalone", default=None,
              help="One Spark for flintlock and plain PySpark: a Spark Connect server "
                   "(sc://host:port; TaskManagers get -D spark.remote=URL, PySpark connects with "
                   "SparkSession.builder.remote) or 'standalone' (a Spark standalone cluster "
                   "started and stopped by the harness). [default: each system its own local "
                   "Spark]")
@click.option("--keep-going", is_flag=True,
              help="Record a failed or timed-out run and go on (wrong answers always stop).")
@click.option("--require-pyflink", is_flag=True,
              help="Fail instead of skipping PyFlink when it cannot be installed.")
@click.option("--out", "out_dir", default="benchmarks/results", show_default=True)
@click.option("--no-report", is_flag=True, help="Do not regenerate docs/benchmarks.md.")
@click.option("--docs", default=None, help="Markdown file to write [default: docs/benchmarks.md].")
def run(sf: float, runs: int, warmups: int, systems: str, workloads: str, data_root: str,
        text_copies: int, parallelism: int | None, cores: int | None, task_managers: int,
        slots: int | None, timeout: float, latency_runs: int, control_plane_sizes: str,
        control_plane_runs: int, control_plane_timeout: float,
        control_plane_budget: float, slot_sharing_runs: int, slot_sharing_measured: int,
        load_jobs: int, flintlock_conf: tuple[str, ...], spark_remote: str | None,
        keep_going: bool, require_pyflink: bool, out_dir: str, no_report: bool,
        docs: str | None) -> None:
    """Run the benchmark, write benchmarks/results/<date>-<host>.json and the report."""
    n = os.cpu_count() or 1
    remote, conf = _spark_remote(spark_remote, flintlock_conf)
    settings = Settings(
        data_root=data_root, sf=sf, runs=runs, warmups=warmups,
        systems=_names(systems, system_names(), "systems"),
        workloads=_names(workloads, (*WORKLOADS, *EXTRA_WORKLOADS), "workloads",
                         {"tpch": TPCH}),
        parallelism=parallelism or n, cores=cores or n, task_managers=task_managers,
        slots_per_task_manager=slots or max(1, n // task_managers), text_copies=text_copies, timeout_s=timeout,
        latency_runs=latency_runs, control_plane_sizes=_sizes(control_plane_sizes),
        control_plane_runs=control_plane_runs, control_plane_timeout_s=control_plane_timeout,
        control_plane_budget_s=control_plane_budget, slot_sharing_runs=slot_sharing_runs,
        slot_sharing_measured=min(slot_sharing_measured, slot_sharing_runs), load_jobs=load_jobs,
        keep_going=keep_going, pyflink_required=require_pyflink, out_dir=out_dir,
        flintlock_conf=conf, spark_remote=remote,
    )
    try:
        path = run_benchmark(settings, log=lambda msg: click.echo(msg, err=True))
    except WrongAnswer as exc:
        click.echo(f"\nWRONG ANSWER, benchmark stopped:\n{exc}", err=True)
        sys.exit(2)
    except RunFailed as exc:
        click.echo(f"\nA run failed, benchmark stopped (--keep-going records it instead):\n{exc}",
                   err=True)
        sys.exit(1)
    click.echo(str(path))
    if not no_report:
        from benchmarks.report import write_report

        click.echo(f"report: {write_report(path, docs)}", err=True)


@cli.command()
@click.argument("results", type=click.Path(exists=True, dir_okay=False))
@click.option("--docs", default=None, help="Markdown file to write [default: docs/benchmarks.md].")
def report(results: str, docs: str | None) -> None:
    """Regenerate docs/benchmarks.md and docs/images/bench-*.png from RESULTS."""
    from benchmarks.report import write_report

    click.echo(str(write_report(results, docs)))


if __name__ == "__main__":
    cli(prog_name="python -m benchmarks")
