"""REST handlers, one module per resource: cluster, jobs, job submission."""

from __future__ import annotations

__all__: list[str] = []
