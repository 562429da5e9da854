"""The host project's URLs: its own pages, and the FlowFabric dashboard (pages, API, /healthz) under /ff/."""

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def host_home(request: HttpRequest) -> HttpResponse:
    return HttpResponse("the host project's own home page")


urlpatterns = [
    path("", host_home),
    path("admin/", admin.site.urls),
    path("ff/", include("dashboard.urls")),
]
