"""ASGI entry point: HTTP through Django, websockets through Channels (own-origin check, session auth)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
django_asgi_app = get_asgi_application()

import logging  # noqa: E402

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from dashboard.api.access import startup_warning  # noqa: E402
from dashboard.routing import websocket_urlpatterns  # noqa: E402
from dashboard.static_files import StaticFiles  # noqa: E402
from dashboard.ws_origin import OwnOriginOnly, UnknownPath  # noqa: E402

if (_warning := startup_warning()) is not None:
    logging.getLogger("dashboard.security").warning(_warning)

# daphne serves static files too: no CDN and no separate file server for a local console.
django_asgi_app = StaticFiles(django_asgi_app)

application = ProtocolTypeRouter({
    "http": django_asgi_app,
    "websocket": OwnOriginOnly(AuthMiddlewareStack(URLRouter(
        [*websocket_urlpatterns, re_path(r"", UnknownPath.as_asgi())]))),
})
