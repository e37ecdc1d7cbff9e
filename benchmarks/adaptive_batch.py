"""AdaptiveBatchScheduler benchmark: the schedulers compared and speculation off/on, from one run.

One command measures both comparisons of issue 15 and writes them on one page: first
``benchmarks/schedulers.py``'s (the DefaultScheduler, the AdaptiveBatchScheduler, and the
AdaptiveBatchScheduler without its run-time join decisions, on each TPC-H set given), then
``benchmarks/speculation.py``'s (one TaskManager 5x slower, speculation off and on, on one set).
Their methods follow, each before its tables.

    python benchmarks/adaptive_batch.py --data data/tpch-sf1,data/tpch-sf0.1 --speculation-data data/tpch-sf1 --runs 2

prints the tables, writes the raw figures to ``benchmarks/results/`` and the page
``docs/adaptive-batch-benchmark.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import schedulers, speculation
from benchmarks.machine import write_page


def _method(doc: str | None) -> str:
    """A benchmark module's method paragraphs (its docstring minus the title and usage)."""
    return (doc or "").split("\n\n", 1)[1].split("\n\n    python")[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/tpch-sf1,data/tpch-sf0.1",
                        help="comma-separated TPC-H directories for the schedulers")
    parser.add_argument("--speculation-data", default="data/tpch-sf1")
    parser.add_argument("--queries", default=",".join(f"q{i}" for i in range(1, 23)))
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--speculation-runs", type=int, default=1)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--block", default=speculation.BLOCK,
                        help="execution.batch.speculative.block-slow-node-duration")
    parser.add_argument("--keep-logs", type=Path, default=None,
                        help="copy the speculation clusters' logs into this directory")
    args = parser.parse_args()
    queries = args.queries.split(",")
    load = os.getloadavg()[0]
    scheduler_runs = schedulers.measure([Path(d).resolve() for d in args.data.split(",") if d],
                                        queries, args.runs, args.parallelism)
    scheduler_rows, scheduler_tables = schedulers.tables(scheduler_runs)
    print(scheduler_tables)
    data = Path(args.speculation_data).resolve()
    # the session clusters are new, so the first query warms them up; the data is warm already
    speculation_runs = speculation.measure(data, queries, args.speculation_runs,
                                           args.parallelism, warm_up_every_query=False,
                                           block=args.block, keep_logs=args.keep_logs)
    speculation_rows = speculation.summarize(speculation_runs)
    speculation_table = speculation.table(speculation_rows)
    print(speculation_table)
    body = "\n\n".join([
        "## DefaultScheduler vs AdaptiveBatchScheduler", _method(schedulers.__doc__),
        scheduler_tables,
        f"## Speculative execution ({data.name}, one TaskManager {speculation.SLOWDOWN}x slower)",
        _method(speculation.__doc__),
        f"Here with {args.speculation_runs} run(s) per mode and query, slow nodes blocked for "
        f"{args.block}, and a warm-up of the three new clusters with the first query only.",
        speculation_table])
    write_page("benchmarks/adaptive_batch.py", __doc__,
               "AdaptiveBatchScheduler: schedulers and speculative execution on TPC-H", body,
               {"schedulers": {"runs": [asdict(r) for r in scheduler_runs],
                               "rows": scheduler_rows},
                "speculation": {"runs": [asdict(r) for r in speculation_runs],
                                "rows": speculation_rows}},
               "adaptive-batch", load, f", parallelism {args.parallelism}")


if __name__ == "__main__":
    main()
