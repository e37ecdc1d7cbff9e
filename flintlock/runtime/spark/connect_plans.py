"""Plan building that costs the Spark Connect server no extra analysis.

On Spark Connect, a plan is analyzed on the server each time the client asks for something about
it (``AnalyzePlan``: schema, ``isStreaming``) and, when executed, once per relation the server
builds through the classic ``Dataset`` API: ``WithColumns``, ``WithColumnsRenamed`` and ``Drop``
relations are each turned into a ``Dataset`` over their input, which analyzes that whole input
again (``SparkConnectPlanner.transformWithColumns`` / ``transformDrop``), while ``Project``
(``select``) and ``Filter`` become logical nodes directly. A streaming task builds its plans
again every epoch, so on the window operator of the flights benchmark these analyses, not the
Spark jobs, took most of an epoch (profiled in docs/design.md, "Plan analysis per epoch").

- ``observe``: ``df.observe`` without the ``isStreaming`` round trip of Connect's
  ``Observation``;
- ``with_columns`` / ``select_except``: ``withColumn`` / ``drop`` as one ``select`` over known
  column names.

These plans are batch plans only: no task builds a streaming ``DataFrame`` (each epoch is a Spark
batch job over that epoch's input).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["col", "field_name", "observe", "select_except", "with_columns"]


def observe(df: Any, observation: Any, *exprs: Any) -> Any:
    """``df.observe(observation, *exprs)`` for a batch ``df``.

    Spark Connect's ``Observation`` first asks the server whether ``df`` is streaming (an
    ``AnalyzePlan`` round trip that analyzes the whole plan, listing the files it reads
    included), to refuse streaming plans. Every plan of a task is a batch plan, so the answer is
    recorded on ``df`` beforehand (the property is cached per ``DataFrame`` instance; classic
    PySpark computes it locally and is left as it is).
    """
    if isinstance(inspect.getattr_static(type(df), "isStreaming", None), functools.cached_property):
        df.__dict__.setdefault("isStreaming", False)
    return df.observe(observation, *exprs)


def with_columns(df: Any, columns: Iterable[str], added: Mapping[str, Any]) -> Any:
    """``df``'s ``columns`` (names, in order) with the ``added`` columns (name -> Column)
    appended or, where a name is one of ``columns``, replaced in place, as one ``select``: what
    ``df.withColumns(added)`` returns when ``columns`` are all of ``df``'s; columns of ``df`` not
    listed are left out."""
    names = list(columns)
    kept = [added[n].alias(n) if n in added else col(n) for n in names]
    return df.select(*kept, *[c.alias(n) for n, c in added.items() if n not in names])


def select_except(df: Any, columns: Iterable[str], dropped: Iterable[str]) -> Any:
    """``df.drop(*dropped)`` as one ``select`` of ``df``'s other ``columns`` (its names, in
    order)."""
    gone = set(dropped)
    return df.select(*[col(n) for n in columns if n not in gone])


def col(name: str) -> Any:
    """The column named ``name`` exactly (quoted: dots and backquotes are part of the name)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def field_name(reference: str) -> str:
    """The top-level field a column ``reference`` as PySpark parses it names: the name inside
    one backquoted identifier (```a.b``` -> ``a.b``, doubled backquotes as one), else
    ``reference`` itself (``key_by("a.b")`` means field ``a.b`` only where Spark resolves it so).
    """
    if len(reference) >= 2 and reference[0] == reference[-1] == "`":
        inner = reference[1:-1]
        if "`" not in inner.replace("``", ""):
            return inner.replace("``", "`")
    return reference
