"""Live job progress for attached runs: a rich progress bar per JobVertex.

Each bar shows the vertex name, its finished/total subtasks and its aggregated state; the display
ends with the job's final status. Snapshots come from ``JobClient.get_job_details()``. Lines about
failures and restarts (``flintlock.client.job_events``) are printed above the bars as they happen.
Running streaming vertices add their live metrics (``live_summary``): records in and out, output
records per second, back pressure and busy share, and the input watermark.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph, ArchivedJobVertex

__all__ = ["follow_job", "live_summary", "print_lines", "stderr_console", "vertex_label"]


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def print_lines(console: Console, lines: list[str]) -> None:
    """Print ``lines`` as they are (no rich markup, no highlighting)."""
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def follow_job(
    snapshot: Callable[[], ArchivedExecutionGraph],
    is_done: Callable[[], bool],
    console: Console | None = None,
    interval_s: float = 0.25,
    report: Callable[[ArchivedExecutionGraph], list[str]] | None = None,
) -> None:
    """Render progress until ``is_done()``; ``snapshot()`` returns the job's current graph.

    ``report(graph)`` returns lines to print above the bars (failures and restarts).
    """
    console = console or stderr_console()
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[state]}"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[live]}"),
        console=console,
        transient=False,
        disable=not console.is_terminal,
    ) as progress:
        tasks: dict[object, TaskID] = {}
        while True:
            done = is_done()
            graph = snapshot()
            if report is not None:
                print_lines(progress.console, report(graph))
            for vertex in graph.vertices:
                finished = sum(1 for s in vertex.subtasks if s.state.name == "FINISHED")
                state = vertex_label(vertex, graph.pending_slot_requests)
                live = live_summary(vertex)
                if vertex.id not in tasks:
                    tasks[vertex.id] = progress.add_task(
                        _short(vertex.name), total=vertex.parallelism, state=state, live=live
                    )
                progress.update(tasks[vertex.id], completed=finished, state=state,
                                live=live or progress.tasks[tasks[vertex.id]].fields["live"])
            if done:
                break
            time.sleep(interval_s)


def live_summary(vertex: ArchivedJobVertex) -> str:
    """``in 1,200 out 1,180 590/s bp 80% busy 15% wm 2013-01-03T01:00:00Z`` for a vertex whose
    running subtasks report live metrics (summed / averaged over them; the watermark is their
    minimum); "" when none does."""
    live = [s.live for s in vertex.subtasks if s.live is not None]
    if not live:
        return ""
    n = len(live)
    text = (f"in {sum(m.records_in for m in live):,} out {sum(m.records_out for m in live):,} "
            f"{sum(m.records_out_per_second for m in live):,.0f}/s "
            f"bp {sum(m.back_pressured_ms_per_second for m in live) / n / 10:.0f}% "
            f"busy {sum(m.busy_ms_per_second for m in live) / n / 10:.0f}%")
    marks = [m.input_watermark for m in live if m.input_watermark is not None]
    if len(marks) == len(live):
        low = min(marks)
        when = ("end" if low >= 2**63 - 1 else
                datetime.datetime.fromtimestamp(low / 1000, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        text += f" wm {when}"
    return text


def vertex_label(vertex: ArchivedJobVertex, pending_slot_requests: int) -> str:
    """The vertex's aggregated state, or ``WAITING FOR SLOTS`` while its subtasks wait for slots."""
    waiting = any(s.state.name == "SCHEDULED" for s in vertex.subtasks)
    return "WAITING FOR SLOTS" if waiting and pending_slot_requests > 0 else vertex.state.name

