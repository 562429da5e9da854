"""The NinjaAPI instance: auth, error mapping, and the area routers under /v1/."""

from __future__ import annotations

from ninja import NinjaAPI, Swagger

from . import (
    admin,
    budgets,
    bulk_signal,
    errors,
    executions,
    flows,
    history,
    reads,
    schedules,
    signals,
    spend,
    streams,
    tags,
    workers,
)
from .access import authorize
from .docs import docs_access
from .schemas import ObjectParser

api = NinjaAPI(
    title="FlowFabric API", version="1", description="Durable executions on Valkey (upstream FlowFabric "
    "v0.2.0 routes). Auth: `Authorization: Bearer $FF_API_TOKEN` or a signed-in dashboard session.",
    auth=authorize, parser=ObjectParser(), urls_namespace="api", docs_url="/api/docs", openapi_url="/api/openapi.json",
    # Docs and schema behind sign-in (or the token); Swagger UI from ninja's bundled static files ("ninja" in
    # INSTALLED_APPS), with no request to swagger.io's validator.
    docs_decorator=docs_access, docs=Swagger(settings={"validatorUrl": None}),
)
errors.install(api)
api.add_router("/v1", executions.router)
api.add_router("/v1", history.router)
api.add_router("/v1", workers.router)
api.add_router("/v1", signals.router)
api.add_router("/v1", bulk_signal.router)
api.add_router("/v1", streams.router)
api.add_router("/v1", flows.router)
api.add_router("/v1", reads.router)
api.add_router("/v1", budgets.router)
api.add_router("/v1", admin.router)
api.add_router("/v1", schedules.router)
api.add_router("/v1", tags.router)
api.add_router("/v1", spend.router)
