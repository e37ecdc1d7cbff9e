"""Cluster handlers: ``/config``, ``/overview``, ``DELETE /cluster`` (needs the cluster secret;
TaskManagers: ``taskmanagers``)."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from flintlock.runtime.rest import messages
from flintlock.runtime.rest.openapi import SECURED
from flintlock.runtime.rest.routing import Ctx, new_router
from flintlock.runtime.rest.security import authenticate

__all__ = ["router"]

router = new_router()


@router.get("/config", tags=["cluster"], summary="Configuration of the web dashboard.")
async def dashboard_config(ctx: Ctx) -> dict[str, Any]:
    return messages.dashboard_configuration(ctx.configuration, ctx.flink_version,
                                            ctx.flink_revision)


@router.get("/overview", tags=["cluster"], summary="Overview of the cluster.")
async def cluster_overview(ctx: Ctx) -> dict[str, Any]:
    overview = await ctx.dispatcher.request_cluster_overview()
    return messages.cluster_overview(overview, ctx.flink_version, ctx.flink_revision)


@router.delete("/cluster", status_code=202, tags=["cluster"], openapi_extra=SECURED,
               summary="Shuts down the cluster (needs the secret).")
async def shutdown_cluster(request: Request, ctx: Ctx) -> dict[str, Any]:
    authenticate(request, ctx.secret, "Shutting down the cluster")
    await ctx.dispatcher.shutdown_cluster()
    return {}
