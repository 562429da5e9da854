"""The NinjaAPI instance: auth, error mapping, and the area routers under /v1/."""

from __future__ import annotations

from ninja import NinjaAPI

from . import admin, budgets, errors, executions, flows, signals, streams, workers
from .access import authorize
from .schemas import ObjectParser

api = NinjaAPI(
    title="FlowFabric API", version="1", description="Durable executions on Valkey (upstream FlowFabric "
    "v0.2.0 routes). Auth: `Authorization: Bearer $FF_API_TOKEN` or a signed-in dashboard session.",
    auth=authorize, parser=ObjectParser(), urls_namespace="api", docs_url="/api/docs", openapi_url="/api/openapi.json",
)
errors.install(api)
api.add_router("/v1", executions.router)
api.add_router("/v1", workers.router)
api.add_router("/v1", signals.router)
api.add_router("/v1", streams.router)
api.add_router("/v1", flows.router)
api.add_router("/v1", budgets.router)
api.add_router("/v1", admin.router)
