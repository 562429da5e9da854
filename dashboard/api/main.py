"""The NinjaAPI instance: auth, error mapping, and the area routers under /v1/."""

from __future__ import annotations

from ninja import NinjaAPI

from . import errors, executions, workers
from .access import authorize

api = NinjaAPI(
    title="FlowFabric API", version="1", description="Durable executions on Valkey (upstream FlowFabric "
    "v0.2.0 routes). Auth: `Authorization: Bearer $FF_API_TOKEN` or a signed-in dashboard session.",
    auth=authorize, urls_namespace="api", docs_url="/api/docs", openapi_url="/api/openapi.json",
)
errors.install(api)
api.add_router("/v1", executions.router)
api.add_router("/v1", workers.router)
