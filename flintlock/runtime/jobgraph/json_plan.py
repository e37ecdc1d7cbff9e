"""How a JobGraph plan node names its vertex (Flink ``runtime/jobgraph/jsonplan/JsonPlanGenerator``).

Flink 2.x JobVertices carry no operator name or description (those were the DataSet optimizer's),
so a plan node's ``operator`` and ``operator_strategy`` are empty strings and its
``description`` is the vertex name (or its pretty name), HTML-escaped. The web dashboard decodes
the HTML and prints ``operator``, then the vertex name, on each node of the job graph.
"""

from __future__ import annotations

__all__ = ["plan_description"]

_HTML_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def plan_description(name: str) -> str:
    """A vertex name as ``JsonPlanGenerator`` writes a node's ``description``: HTML-escaped
    (``&``, ``<``, ``>``, ``"``; Flink's ``escapeHtml4`` also names non-ASCII letters, which are
    kept as they are here), line breaks as ``<br/>`` and backslashes as ``&#92;``.

    >>> plan_description("Source: a -> Map")
    'Source: a -&gt; Map'
    """
    escaped = "".join(_HTML_ESCAPES.get(c, c) for c in name)
    return escaped.replace("\n", "<br/>").replace("\\", "&#92;")
