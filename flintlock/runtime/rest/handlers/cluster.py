"""Cluster handlers: ``/config``, ``/overview``, ``/taskmanagers[/:id]``, ``DELETE /cluster``."""

from __future__ import annotations

from typing import Any

from flintlock.runtime.rest import messages
from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.routing import Ctx, new_router

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


@router.delete("/cluster", status_code=202, tags=["cluster"], summary="Shuts down the cluster.")
async def shutdown_cluster(ctx: Ctx) -> dict[str, Any]:
    await ctx.dispatcher.shutdown_cluster()
    return {}


@router.get("/taskmanagers", tags=["taskmanagers"], summary="Overview of all TaskManagers.")
async def task_managers(ctx: Ctx) -> dict[str, Any]:
    infos = await ctx.dispatcher.request_task_manager_infos()
    return {"taskmanagers": [messages.task_manager_info(tm) for tm in infos]}


@router.get("/taskmanagers/{taskmanagerid}", tags=["taskmanagers"],
            summary="Details of one TaskManager.")
async def task_manager(taskmanagerid: str, ctx: Ctx) -> dict[str, Any]:
    for tm in await ctx.dispatcher.request_task_manager_infos():
        if str(tm.resource_id) == taskmanagerid:
            return messages.task_manager_details(tm)
    raise RestHandlerException(404, f"Could not find TaskManager {taskmanagerid}.")
