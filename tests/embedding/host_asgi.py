"""The host project's ASGI app: its HTTP app, and the dashboard's websockets under the same /ff/ prefix as
its pages (the pages open their sockets at <dashboard root>ws/…)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.embedding.host_settings")
http_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from dashboard.routing import websocket_urlpatterns  # noqa: E402
from dashboard.ws_origin import OwnOriginOnly  # noqa: E402

application = ProtocolTypeRouter({
    "http": http_app,
    "websocket": OwnOriginOnly(AuthMiddlewareStack(URLRouter([
        path("ff/", URLRouter(websocket_urlpatterns)),
    ]))),
})
