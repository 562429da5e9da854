from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import views
from .api import ops
from .api.main import api
from .views.auth import LoginView

urlpatterns = [
    path("", views.overview, name="home"),
    path("system/", views.system, name="system"),
    path("executions/", views.executions, name="executions"),
    path("executions/bulk/preview", views.bulk_preview, name="bulk_preview"),
    path("executions/bulk/run", views.bulk_run, name="bulk_run"),
    path("executions/bulk/<uuid:job>/", views.bulk_status, name="bulk_status"),
    path("executions/<str:eid>/", views.execution, name="execution"),
    path("executions/<str:eid>/cancel", views.act, {"name": "cancel"}, name="act_cancel"),
    path("executions/<str:eid>/replay", views.act, {"name": "replay"}, name="act_replay"),
    path("executions/<str:eid>/revoke", views.act, {"name": "revoke"}, name="act_revoke"),
    path("executions/<str:eid>/priority", views.act, {"name": "priority"}, name="act_priority"),
    path("executions/<str:eid>/take", views.act, {"name": "take"}, name="act_take"),
    path("", include("dashboard.views.search")),
    path("", include("dashboard.views.rows")),
    path("", include("dashboard.views.waitpoints")),
    path("", include("dashboard.views.flows")),
    path("", include("dashboard.views.budgets")),
    path("", include("dashboard.views.schedules")),
    path("", include("dashboard.views.tags")),
    path("", include("dashboard.views.streams")),
    path("", include("dashboard.views.ui")),
    path("", include("dashboard.views.audit")),
    path("", include("dashboard.views.workers")),
    path("", include("dashboard.views.attempts")),
    path("", include("dashboard.views.values")),
    path("", include("dashboard.views.history")),
    path("healthz", ops.healthz, name="healthz"),
    path("metrics", ops.metrics, name="metrics"),
    path("", api.urls),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
]
