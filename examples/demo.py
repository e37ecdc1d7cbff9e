"""The flintlock demo: TPC-H queries, nycflights13 and word count on the local cluster.

    python -m examples.demo --data data [--sf 1] [--only q1,q6,flights] [--output output]

For each example it prints the first rows as a table, the row count and the wall time; every result
is also written as Parquet through ``FileSink`` under ``--output`` (``output/<example>/``).
``make demo`` runs this after ``python -m examples.data --sf $(SF) --out $(DATA)``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from examples import data as datagen
from examples import flights, word_count
from examples.streaming import carrier_alerts, departures
from examples.streaming import word_count as streaming_word_count
from examples.tpch import QUERY_NAMES, builder

SHOW_ROWS = 10

#: what ``make demo`` runs by default (``--only`` picks any TPC-H query or example)
TITLES = {
    "q1": "TPC-H Q1  pricing summary report",
    "q3": "TPC-H Q3  shipping priority",
    "q5": "TPC-H Q5  local supplier volume",
    "q6": "TPC-H Q6  forecasting revenue change",
    "q10": "TPC-H Q10 returned item reporting",
    "q12": "TPC-H Q12 shipping modes and order priority",
    "q18": "TPC-H Q18 large volume customer",
    "flights": "nycflights13  arrival delay per carrier and month",
    "word_count": "word count  top 20 words of the King James Bible",
    "departures": "streaming  nycflights13 departures per airport and hour (event time)",
    "carrier_alerts": "streaming  three delayed departures of a carrier within 30 min (state + timers)",
    "streaming_word_count": "streaming  word count per 5 s processing-time window",
}
#: the streaming examples, run in STREAMING mode over a bounded replay of a few seconds
STREAMING = ("departures", "carrier_alerts", "streaming_word_count")


def _pick_tpch(data: Path, sf: float | None) -> Path:
    if sf is not None:
        path = datagen.tpch_dir(data, sf)
        if not (path / "lineitem").is_dir():
            raise SystemExit(
                f"no TPC-H SF {datagen.sf_label(sf)} in {path}: "
                f"run python -m examples.data --sf {datagen.sf_label(sf)} --out {data}"
            )
        return path
    found = sorted(p for p in data.glob("tpch-sf*") if (p / "lineitem").is_dir())
    if not found:
        raise SystemExit(f"no TPC-H data under {data}: run python -m examples.data --out {data}")
    preferred = data / "tpch-sf1"
    return preferred if preferred in found else found[0]


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.4f}"
    if v is None:
        return "NULL"
    s = str(v)
    return s if len(s) <= 40 else s[:37] + "..."


def _show(console: Any, title: str, rows: list[Any], took: float, out: Path | None) -> None:
    from rich.table import Table

    cols = list(rows[0].__fields__) if rows and hasattr(rows[0], "__fields__") else []
    table = Table(title=title, title_justify="left", show_lines=False)
    for c in cols:
        table.add_column(c, overflow="fold")
    for r in rows[:SHOW_ROWS]:
        table.add_row(*(_fmt(v) for v in r))
    console.print(table)
    more = f" (first {SHOW_ROWS} shown)" if len(rows) > SHOW_ROWS else ""
    where = f"; Parquet: {out}" if out is not None else ""
    console.print(f"[bold]{len(rows)} rows{more}[/bold] in [bold]{took:.2f} s[/bold]{where}\n")


def _with_late_sink(streams: tuple[Any, Any], out: Path) -> Any:
    """The hourly departures; the late flights go to ``<out>-late`` through a FileSink."""
    from flintlock.connectors import FileSink

    hourly, late = streams
    late.sink_to(FileSink.parquet(str(out.with_name(out.name + "-late"))))
    return hourly


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
    from flintlock.connectors import FileSink

    p = argparse.ArgumentParser(description="run the flintlock examples on the local cluster")
    p.add_argument("--data", default="data", help="data root written by examples.data")
    p.add_argument("--sf", type=float, default=None, help="TPC-H scale factor (default: 1 if present)")
    p.add_argument("--output", default="output", help="where results are written as Parquet")
    p.add_argument("--only", default="", help="comma-separated subset, e.g. q1,q6,flights")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--python-word-count", action="store_true", help="word count via flat_map")
    args = p.parse_args(argv)

    # Not a terminal (make demo | tee, CI logs): rich would squeeze tables into 80 columns and
    # wrap numbers digit by digit; give tables the width they need instead.
    console = Console() if sys.stdout.isatty() else Console(width=240)
    data = Path(args.data)
    tpch = _pick_tpch(data, args.sf)
    output = Path(args.output)
    names = [*(q for q in QUERY_NAMES if q in TITLES), "flights", "word_count", *STREAMING]
    if args.only:
        known = [*QUERY_NAMES, "flights", "word_count", *STREAMING]
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(wanted) - set(known))
        if unknown:
            p.error(f"unknown examples {unknown}; choose from {known}")
        names = [n for n in known if n in wanted]

    jobs: dict[str, Callable[[Any, Path], Any]] = {}
    for q in QUERY_NAMES:
        jobs[q] = lambda env, out, q=q: builder(q)(env, str(tpch))
    jobs["flights"] = lambda env, out: flights.build(env, str(data), str(out))
    jobs["word_count"] = lambda env, out: word_count.build(
        env, str(data), python=args.python_word_count
    )
    jobs["departures"] = lambda env, out: _with_late_sink(
        departures.build(env, str(data), rate=20_000, limit=20_000), out)
    jobs["carrier_alerts"] = lambda env, out: carrier_alerts.build(
        env, str(data), rate=30_000, limit=30_000)
    jobs["streaming_word_count"] = lambda env, out: streaming_word_count.build(
        env, str(word_count.text_path(data)), watch_interval=None)

    console.print(
        f"[bold]flintlock demo[/bold]: TPC-H {tpch}, nycflights13 and text under {data}; "
        f"parallelism {args.parallelism}; results under {output}/\n"
    )
    conf = Configuration({"local.number-taskmanager": 2, "taskmanager.numberOfTaskSlots": 2})
    summary: list[tuple[str, int | str, float]] = []
    failed = 0
    t_all = time.perf_counter()
    for name in names:
        out = output / name
        for old in (out, out.with_name(out.name + "-late")):  # FileSink refuses a non-empty target
            shutil.rmtree(old, ignore_errors=True)
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(args.parallelism)
        env.set_runtime_mode(RuntimeExecutionMode.STREAMING if name in STREAMING
                             else RuntimeExecutionMode.BATCH)
        t0 = time.perf_counter()
        try:
            stream = jobs[name](env, out)
            if name != "flights":  # flights adds its own FileSink
                stream.sink_to(FileSink.parquet(str(out)))
            rows = stream.execute_and_collect(job_execution_name=f"demo {name}")
            if name in STREAMING:  # arrival order: show them sorted
                rows = sorted(rows, key=lambda r: tuple(str(v) for v in r))
        except Exception as e:  # keep going: show every example's outcome
            took = time.perf_counter() - t0
            failed += 1
            console.print(f"[red]{TITLES.get(name, name)}: FAILED after {took:.2f} s: {e}[/red]\n")
            summary.append((name, "FAILED", took))
            continue
        took = time.perf_counter() - t0
        _show(console, TITLES.get(name, f"TPC-H {name.upper()}"), rows, took, out if flights.has_parquet(out) else None)
        summary.append((name, len(rows), took))

    from rich.table import Table

    table = Table(title="summary", title_justify="left")
    table.add_column("example")
    table.add_column("rows", justify="right")
    table.add_column("wall time", justify="right")
    for name, n, took in summary:
        table.add_row(name, str(n), f"{took:.2f} s")
    console.print(table)
    console.print(
        f"total {time.perf_counter() - t_all:.1f} s; Parquet results under {output.resolve()}/"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
